/**
 * Node's arguments that run a file of this repository's TypeScript sources in a process a test starts (a server, a
 * proof's worker, the bin); scripts/source-loader.mjs says how, and why not tsx.
 */
import { fileURLToPath } from "node:url"

export const sourceNodeArguments: ReadonlyArray<string> = [
  "--conditions=@custody-relay/source",
  "--import",
  fileURLToPath(new URL("../../../scripts/source-loader.mjs", import.meta.url))
]
