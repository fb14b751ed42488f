/**
 * Services the test command (scripts/test.sh) started for this run. A test that needs one
 * fails with a clear message when it is missing: nothing is skipped silently.
 */
export function etcdEndpoints(): string[] {
  const v = process.env.TEST_ETCD_ENDPOINTS;
  if (v === undefined || v === '') {
    throw new Error('TEST_ETCD_ENDPOINTS is not set: run the tests through `npm test`, which starts etcd');
  }
  return v.split(',');
}
