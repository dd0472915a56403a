/**
 * Preloaded (`node --require`) into a process under test: at its exit, writes the files it loaded (require's
 * cache, which also holds the CommonJS modules that `import()` loaded) as JSON to TILEBREAKER_TEST_MODULES_OUT.
 */
import { writeFileSync } from 'node:fs';

const out = process.env['TILEBREAKER_TEST_MODULES_OUT'];
if (out) process.on('exit', () => writeFileSync(out, JSON.stringify(Object.keys(require.cache))));
