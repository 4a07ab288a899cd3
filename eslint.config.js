// The linter's rules: typescript-eslint's recommended set over src/, test/, bench/ and scripts/, and a line
// length of 140 for code, prettier's printWidth (`npm run format`); comments, strings and URLs may run longer.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import regexp from 'eslint-plugin-regexp';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'src/web/assets/vendor/**', 'data/**', 'coverage/**', '.peers/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.js', '**/*.mjs'],
    languageOptions: { ecmaVersion: 2023, sourceType: 'module', globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', performance: 'readonly', fetch: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly', structuredClone: 'readonly', queueMicrotask: 'readonly', URLSearchParams: 'readonly', Response: 'readonly', Request: 'readonly', Headers: 'readonly', globalThis: 'readonly', document: 'readonly', window: 'readonly', EventSource: 'readonly' } },
    rules: {
      'max-len': ['error', { code: 140, ignoreComments: true, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreUrls: true, ignoreRegExpLiterals: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // Matching control characters is the point where it is done: XML 1.0 forbids them in documents.
      'no-control-regex': 'off',
    },
  },
  // Every pattern in src/ may meet a stranger's bytes (headers, query strings, form fields, XML-RPC values,
  // fetched feeds): none may backtrack or move super-linearly. `/^Bearer\s+(.+?)\s*$/i` took 313 ms of
  // event loop for one 16 KB Authorization header (issue 43); test/hostile/headers.test.ts pumps each input.
  {
    files: ['src/**/*.ts'],
    plugins: { regexp },
    rules: { 'regexp/no-super-linear-backtracking': 'error', 'regexp/no-super-linear-move': 'error' },
  },
  // Tests and benchmarks read JSON answers whose shape the assertions check.
  { files: ['test/**', 'bench/**'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },
  // The status page's script runs in the browser, beside uPlot's.
  { files: ['src/web/assets/**/*.js'], languageOptions: { sourceType: 'script', globals: { getComputedStyle: 'readonly', uPlot: 'readonly' } }, rules: { 'no-useless-assignment': 'off', 'no-var': 'off' } },
);
