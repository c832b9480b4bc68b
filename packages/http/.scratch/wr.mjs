import { openSync, writeSync } from "node:fs"
const fd = openSync("/tmp/wr.log", "w")
const line = JSON.stringify({message:"request",level:"INFO",timestamp:new Date().toISOString(),annotations:{requestId:"0193a0b2-1234-7abc-8def-0123456789ab",method:"GET",path:"/relay/v1/accounts/0193a0b2-1234-7abc-8def-0123456789ab",status:200,durationMs:0,keyId:"0193a0b2-1234-7abc-8def-0123456789ab"},spans:{},fiberId:"#12345"})
console.log(line.length)
for (const batch of [1, 20, 170, 1000]) {
  const N = 400000
  const t = performance.now()
  let g = ""
  for (let i = 0; i < N; i++) {
    g = g === "" ? line + i : `${g}\n${line}${i}`
    if ((i + 1) % batch === 0) { writeSync(fd, g + "\n"); g = "" }
  }
  console.log(batch, ((performance.now() - t) * 1000 / N).toFixed(3), "µs/line")
}
