const a = { requestId: "0193a0b2-1234-7abc-8def-0123456789ab", method: "GET", path: "/relay/v1/accounts/0193a0b2-1234-7abc-8def-0123456789ab", status: 200, durationMs: 0, keyId: "0193a0b2-1234-7abc-8def-0123456789ab" }
const N = 2e6
let s = 0
for (const [name, f] of [["stringify", (o) => JSON.stringify(o)], ["manual", (o) => `{"requestId":${JSON.stringify(o.requestId)},"method":${JSON.stringify(o.method)},"path":${JSON.stringify(o.path)},"status":${o.status},"durationMs":${o.durationMs},"keyId":${JSON.stringify(o.keyId)}}`], ["stringify", (o) => JSON.stringify(o)]]) {
  for (let i = 0; i < N; i++) s += f({ ...a, durationMs: i & 7 }).length
  const t = performance.now()
  for (let i = 0; i < N; i++) s += f({ ...a, durationMs: i & 7 }).length
  console.log(name, ((performance.now() - t) * 1e6 / N).toFixed(0), "ns")
}
