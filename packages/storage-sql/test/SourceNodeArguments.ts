/**
 * Node's arguments that run a file of this repository's TypeScript sources in a process a test starts (a server, a
 * proof's worker, the bin); scripts/source-loader.mjs says how, and why not tsx.
 */
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

export const sourceNodeArguments: ReadonlyArray<string> = [
  "--conditions=@custody-relay/source",
  "--import",
  fileURLToPath(new URL("../../../scripts/source-loader.mjs", import.meta.url))
]

/**
 * Node's arguments in the package script `name` of the package.json at `manifest`, which must be `node <arguments>`:
 * node itself, so that the process the script starts is the one that serves and gets a supervisor's signals. Behind
 * a launcher such as tsx's CLI, the launcher gets the SIGTERM, relays it, and SIGKILLs a server that has not answered
 * within about 60 ms (as a loaded machine can make it), with no clean stop.
 */
export const scriptNodeArguments = (manifest: URL, name: string): Array<string> => {
  const { scripts } = JSON.parse(readFileSync(manifest, "utf8")) as { scripts: Record<string, string | undefined> }
  const script = scripts[name]
  if (script === undefined) throw new Error(`no script ${name} in ${fileURLToPath(manifest)}`)
  if (!script.startsWith("node ")) throw new Error(`the ${name} script is not node itself: ${script}`)
  return script.slice("node ".length).split(" ")
}
