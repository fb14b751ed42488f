// typescript-eslint with type-checked rules: a floating or misused promise, a non-exhaustive switch
// or an `any` is an error.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'eslint.config.js', 'scripts/**', '.tap/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // One module owns each side effect: only the config loader reads the environment.
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'Read settings through loadConfig (src/config/config.ts).' },
      ],
    },
  },
  {
    files: ['src/main.ts', 'src/cni/client.ts', 'src/config/config.ts', 'test/**', 'bench/**'],
    rules: { 'no-restricted-properties': 'off' },
  },
  {
    // One module runs child processes (src/lib/exec.ts): each with a timeout, its failure
    // described the same way, and timed per program.
    files: ['src/**/*.ts'],
    ignores: ['src/lib/exec.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        ...['node:child_process', 'child_process'].map((name) => ({ name, message: 'Run child processes through src/lib/exec.ts.' })),
      ],
    },
  },
  {
    // tap queues t.test() itself; its returned promise is not meant to be awaited.
    files: ['test/**'],
    rules: { '@typescript-eslint/no-floating-promises': 'off', '@typescript-eslint/require-await': 'off' },
  },
);
