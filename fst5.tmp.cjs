const fs = require('fs');
const settle = async () => { for (let i = 0; i < 3; i++) { global.gc(); await new Promise((r) => setTimeout(r, 150)); } const s = fs.readFileSync('/proc/self/status', 'utf8'); return ['VmRSS', 'RssAnon', 'RssFile'].map((k) => k + ' ' + (Number(s.match(new RegExp(k + ':\\s+(\\d+)'))[1]) / 1024).toFixed(1)).join(' '); };
(async () => {
  console.log('bare   ', await settle());
  for (const m of process.argv.slice(2)) { require(m); console.log(m.padEnd(10), await settle()); }
})();
