#!/usr/bin/env node
// Entry point for the `continuity` command: runs the TypeScript CLI through tsx's
// ESM loader so the package needs no build step.
import { register } from 'tsx/esm/api';
register();
await import('../cli/main.ts');
