// A hot JavaScript function for the JIT tests (cli/tests/profreport/jit.rs):
// `hotLoop` called from `main` until SECONDS (argv[2]) have passed.
function hotLoop(n) {
  let s = 0;
  for (let i = 0; i < n; i++) {
    s += (i * i) % 7;
  }
  return s;
}

function main() {
  const end = Date.now() + 1000 * Number(process.argv[2] || 3);
  let t = 0;
  while (Date.now() < end) {
    t += hotLoop(100000);
  }
  return t;
}

main();
