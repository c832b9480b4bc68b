/**
 * What the framework examples share: a relay handler on SQLite in memory, one API user with every permission made
 * through the handler's runtime (credentials are administration, not API calls), the app listening on PORT (8080
 * by default, 0 for any free port), and one line that says where and with what to call it.
 */
import type { AddressInfo } from "node:net"
import { fileURLToPath } from "node:url"
import { Administration, Permission } from "@custody-relay/core"
import { makeHandler, type RelayHandler } from "@custody-relay/http"
import { Redacted } from "effect"

/** True when the module is the script node was started with (not imported by a test). */
export const isMain = (moduleUrl: string): boolean => process.argv[1] !== undefined && fileURLToPath(moduleUrl) === process.argv[1]

export const startExample = async (
  framework: string,
  listen: (handler: RelayHandler, port: number) => Promise<{ readonly server: { address(): AddressInfo | string | null }; readonly close: () => Promise<void> }>
): Promise<void> => {
  const handler = makeHandler({ logLevel: "Warn" })
  await handler.ready
  const client = await handler.runtime.runPromise(Administration.createClient("Example"))
  const issued = await handler.runtime.runPromise(Administration.createApiUser({ clientId: client.id, permissions: Permission.permissionNames, name: "example" }))
  const { server, close } = await listen(handler, Number(process.env["PORT"] ?? 8080))
  // The stop is in place before the listening line is printed: whoever reads that line may signal at once.
  const stop = async () => {
    await close()
    await handler.dispose()
    process.exit(0)
  }
  process.once("SIGINT", stop)
  process.once("SIGTERM", stop)
  const { port } = server.address() as AddressInfo
  const url = `http://127.0.0.1:${port}`
  // The secret is printed once, here, as the relay's own first start does; it is never logged. The pid is the one
  // to signal: the package script runs this file in node itself, with no launcher process between.
  console.log(`${framework} listening on ${url} pid=${process.pid} key=${issued.keyId} secret=${Redacted.value(issued.secret)}`)
  console.log(`try: curl -s ${url}/relay/v1/accounts -H 'x-api-key: ${issued.keyId}' -H 'x-api-secret: <the secret above>'`)
}

