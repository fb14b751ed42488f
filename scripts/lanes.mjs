// Splits the test files into two lanes of about equal time: the test command runs one tap per
// lane, side by side (this machine has 2 cores). One tap with --jobs=2 runs its files in the
// order of their paths, so the longest file (the swarm test, near the end of the alphabet) began
// late and ran alone: in one full run, 3,300 s of files took 1,905 s, one core idle for 510 s.
//
//   node scripts/lanes.mjs [--times FILE] [--together 'A B ...']... FILE...
//     prints two lines, each the files of one lane (the second may be empty)
//   node scripts/lanes.mjs --times-of LOG
//     prints each file's seconds from a test command's output (tap's `ok N - FILE # time=`),
//     longest first: the form of --times's file (test/file-times.txt)
//
// A file's weight is its seconds in --times (one not listed: DEFAULT_S), and START_S. The files
// of one --together run one after the other in one lane, as one item (they share the run's etcd;
// or side by side they slow each other too much). The longest item goes first to the lane with
// less time (LPT): a stale table costs only balance.
import fs from 'node:fs';

const DEFAULT_S = { e2e: 60, other: 1 };
// Each file also costs tap's time around it: a lane took 2.7-3.3 s a file beyond the sum of its
// files' times in the runs measured (tap's `# time=` counts the file's own process only).
const START_S = 3;
const TAP_LINE = /^(?:not )?ok \d+ - (\S+\.test\.js) # time=([\d.]+)ms/;

const args = process.argv.slice(2);
const option = (name) => {
  const at = args.indexOf(name);
  if (at < 0) return undefined;
  const value = args[at + 1];
  if (value === undefined) throw new Error(`${name} needs a value`);
  args.splice(at, 2);
  return value;
};

const timesOf = (text) => {
  const seconds = new Map();
  for (const line of text.split('\n')) {
    const m = TAP_LINE.exec(line);
    if (m !== null) seconds.set(m[1], Number(m[2]) / 1000);
  }
  return seconds;
};

const readTimes = (file) => {
  const seconds = new Map();
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const m = /^\s*([\d.]+)\s+(\S+)\s*$/.exec(line);
    if (m !== null) seconds.set(m[2], Number(m[1]));
  }
  return seconds;
};

const logFile = option('--times-of');
if (logFile !== undefined) {
  const rows = [...timesOf(fs.readFileSync(logFile, 'utf8'))].sort((a, b) => b[1] - a[1]);
  console.log('# Seconds each test file took in one full run of the test command (some alone, the rest two');
  console.log('# at a time), longest first: scripts/lanes.mjs balances the two lanes of tests by them.');
  console.log('# Refresh from a run\'s output: node scripts/lanes.mjs --times-of LOG > test/file-times.txt');
  for (const [file, s] of rows) console.log(`${s.toFixed(1).padStart(7)} ${file}`);
  process.exit(0);
}

const timesFile = option('--times');
const seconds = timesFile !== undefined && fs.existsSync(timesFile) ? readTimes(timesFile) : new Map();
// Each --together names a group; a file belongs to the first group naming it.
const groups = [];
for (let g = option('--together'); g !== undefined; g = option('--together')) groups.push(g.split(/\s+/).filter(Boolean));
const files = [...new Set(args)];
const groupOf = (f) => groups.findIndex((g) => g.includes(f));
const weight = (f) => START_S + (seconds.get(f) ?? (f.includes('/e2e/') ? DEFAULT_S.e2e : DEFAULT_S.other));

const items = files.filter((f) => groupOf(f) < 0).map((f) => ({ files: [f], s: weight(f) }));
for (let g = 0; g < groups.length; g++) {
  const group = files.filter((f) => groupOf(f) === g);
  if (group.length > 0) items.push({ files: group, s: group.reduce((sum, f) => sum + weight(f), 0) });
}
items.sort((a, b) => b.s - a.s);

const lanes = [
  { files: [], s: 0 },
  { files: [], s: 0 },
];
for (const item of items) {
  const lane = lanes[0].s <= lanes[1].s ? lanes[0] : lanes[1];
  lane.files.push(...item.files);
  lane.s += item.s;
}
for (const lane of lanes) console.log(lane.files.join(' '));
console.error(`lanes: ${lanes.map((l) => `${l.files.length} files, ~${Math.round(l.s)} s`).join('; ')} (by ${timesFile ?? 'defaults'})`);
