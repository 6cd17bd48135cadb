// Regenerates docs/errors.md from the coded error registry (core/errors.ts).
import { writeFileSync } from 'node:fs';
import { renderErrorDocs } from '../core/errors.ts';

writeFileSync(new URL('../docs/errors.md', import.meta.url), renderErrorDocs());
