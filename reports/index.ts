/** Reports built from the named queries. */
export { buildContinuityReport, importedLineCounts } from './continuity.ts';
export type { ContinuityReport, LineCounts, ReportParams } from './continuity.ts';
export { renderContinuityText } from './render-text.ts';
export {
  buildCanaryReport,
  describeGates,
  loadGatesFile,
  parseDuration,
  parseGates,
  gatesFromData,
  shellQuote,
  stepCommand,
  type StepTarget,
  DEFAULT_AFTER_S,
  DEFAULT_GATES,
  GATE_IDS,
  GatesFileSchema,
} from './canary.ts';
export type {
  CanaryOptions,
  CanaryReport,
  CanaryVerdict,
  CountGateConfig,
  DeployInfo,
  GateId,
  GateResult,
  GateVerdict,
  GatesConfig,
  NextStep,
  ProportionBound,
  QueryRead,
  RateGateConfig,
  TimeRange,
} from './canary.ts';
export { renderCanary, renderCanaryHtml, renderCanaryMarkdown, canarySummaryLine, escapeHtml, escapeMarkdown, CANARY_FORMATS } from './canary-render.ts';
export type { CanaryFormat } from './canary-render.ts';
