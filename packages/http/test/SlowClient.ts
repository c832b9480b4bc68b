/**
 * A client that sends a request slowly (a slow-body hold, slowloris-style): an authenticated POST whose headers
 * promise 200 bytes of body, then one byte every 100 ms, 20 s for the whole request. Answers what the server sent
 * once it closed the connection. The request is authenticated because a refused one is answered before its body is
 * read.
 */
import { connect } from "node:net"

export const sendSlowly = async (url: string, credential: { readonly keyId: string; readonly secret: string }): Promise<string> => {
  const socket = connect(Number(new URL(url).port), "127.0.0.1")
  await new Promise((resolve) => socket.once("connect", resolve))
  let answer = ""
  socket.on("data", (chunk: Buffer) => (answer += chunk.toString("latin1")))
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()))
  // The server cutting the connection off while a byte is on its way resets it (ECONNRESET): that is the cut-off this
  // client waits for, and "close" follows; unheard, the error would be thrown at the process.
  socket.on("error", () => undefined)
  socket.write(
    "POST /relay/v1/accounts HTTP/1.1\r\nHost: relay\r\ncontent-type: application/json\r\ncontent-length: 200\r\n" +
      `x-api-key: ${credential.keyId}\r\nx-api-secret: ${credential.secret}\r\n\r\n`
  )
  const trickle = setInterval(() => socket.writable && socket.write(" "), 100)
  await closed
  clearInterval(trickle)
  return answer
}
