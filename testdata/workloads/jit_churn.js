// JIT code churn for the JIT tests (cli/tests/profreport/jit.rs): N
// (argv[2], default 30000) functions made with `new Function`, each called
// twice, and dropped: V8 collects them and puts later code where theirs
// was, while its jitdump (buffered, 2 MB) says so late. Then a hot loop
// for SECONDS (argv[3], default 2): its samples must be named by this
// script's functions, not by the collected ones.
const n = Number(process.argv[2] || 30000);
let t = 0;
for (let i = 0; i < n; i++) {
  const f = new Function('x', `return x * ${i} + ${i % 7};`);
  t += f(1) + f(2);
}
function hot(k) {
  let s = 0;
  for (let i = 0; i < k; i++) s += i % 3;
  return s;
}
const end = Date.now() + 1000 * Number(process.argv[3] || 2);
while (Date.now() < end) t += hot(100000);
console.log(t > 0 ? 'ok' : 'no');
