// typescript-eslint with type-checked rules: a floating or misused promise, a non-exhaustive switch
// or an `any` is an error.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const SPAWN = ['node:child_process', 'child_process'].map((name) => ({ name, message: 'Run child processes through src/lib/exec.ts.' }));
// The CommonJS packages ovsnet runs on: loaded with require() (src/lib/packages.ts says why),
// their types with `import type`. The same list as src/lib/packages.ts's Packages.
export const PACKAGES = ['better-sqlite3', 'cockatiel', 'etcd3', 'fastify', 'ip-address', 'netlink', 'pino', 'prom-client'];
const REQUIRED = PACKAGES.map((name) => ({
  name,
  allowTypeImports: true,
  message: `Load ${name} with requirePackage (src/lib/packages.ts): Node's ES module loader holds megabytes more for a CommonJS package it imports.`,
}));
const KEY_OWNERS = [
  'src/store/**',
  'src/driver/records/**',
  'src/ipam-driver/state/**',
  'src/cni/attachments.ts',
  'src/cluster/hosts.ts',
  'src/cluster/traces.ts',
];
const KEYS = [
  {
    regex: 'store/keys(\\.js)?$|^\\.{1,2}/keys(\\.js)?$',
    message: `Only the owner of a key family builds its keys (${KEY_OWNERS.join(', ')}): ask it for records and transaction parts.`,
  },
];

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
  // One module runs child processes (src/lib/exec.ts): each with a timeout, its failure
  // described the same way, and timed per program. And each family of stored keys has one owner:
  // only the owners (and the store itself) build keys with src/store/keys.ts; the rest gets typed
  // records and transaction parts from them.
  { files: ['src/**/*.ts'], rules: { 'no-restricted-imports': ['error', { paths: [...SPAWN, ...REQUIRED], patterns: KEYS }] } },
  { files: KEY_OWNERS, rules: { 'no-restricted-imports': ['error', { paths: [...SPAWN, ...REQUIRED] }] } },
  { files: ['src/lib/exec.ts'], rules: { 'no-restricted-imports': ['error', { paths: REQUIRED, patterns: KEYS }] } },
  {
    // tap queues t.test() itself; its returned promise is not meant to be awaited.
    files: ['test/**'],
    rules: { '@typescript-eslint/no-floating-promises': 'off', '@typescript-eslint/require-await': 'off' },
  },
);
