#!/usr/bin/env node
// Writes the documents generated from the code (run by `make docs`).
import { writeFileSync } from 'node:fs';
import { renderEnvironmentDoc } from '../dist/src/config/env/docs.js';

writeFileSync(new URL('../docs/ENVIRONMENT.md', import.meta.url), renderEnvironmentDoc());
console.log('wrote docs/ENVIRONMENT.md');
