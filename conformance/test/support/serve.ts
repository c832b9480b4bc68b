/** Serves a fetch handler on a loopback port with node:http, so the kit can be tested over real HTTP. */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import type { Handler } from "../../src/Transport.js"

export const serve = async (handler: Handler): Promise<{ readonly baseUrl: string; readonly close: () => Promise<void> }> => {
  const server: Server = createServer((incoming, outgoing) => {
    const chunks: Array<Buffer> = []
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
    incoming.on("end", () => {
      const headers = new Headers()
      for (let i = 0; i + 1 < incoming.rawHeaders.length; i += 2) headers.append(incoming.rawHeaders[i] ?? "", incoming.rawHeaders[i + 1] ?? "")
      const method = incoming.method ?? "GET"
      const body = method === "GET" || method === "HEAD" ? null : Buffer.concat(chunks)
      handler(new Request(`http://loopback${incoming.url ?? "/"}`, { method, headers, body }))
        .then(async (response) => {
          const payload = Buffer.from(await response.arrayBuffer())
          const out: Record<string, string> = {}
          response.headers.forEach((value, name) => {
            out[name] = value
          })
          out["content-length"] = String(payload.byteLength)
          outgoing.writeHead(response.status, out)
          outgoing.end(payload)
        })
        .catch(() => {
          outgoing.writeHead(500)
          outgoing.end()
        })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return { baseUrl: `http://127.0.0.1:${port}`, close: () => new Promise<void>((resolve, reject) => server.close((error) => (error === undefined ? resolve() : reject(error)))) }
}
