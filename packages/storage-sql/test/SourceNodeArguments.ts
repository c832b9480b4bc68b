/**
 * Node's arguments that run a file of this repository's TypeScript sources in a process a test starts (a server, a
 * proof's worker, the bin); scripts/source-loader.mjs says how, and why not tsx. And what a package script must be
 * (node itself), with the hold that shows why.
 */
import type { ChildProcess } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

/** The in-thread loader that runs TypeScript (with `--import`); without the source condition, imports reach dist/. */
export const sourceLoader = fileURLToPath(new URL("../../../scripts/source-loader.mjs", import.meta.url))

export const sourceNodeArguments: ReadonlyArray<string> = ["--conditions=@custody-relay/source", "--import", sourceLoader]

/**
 * Node's arguments in the package script `name` of the package.json at `manifest`, which must be `node <arguments>`:
 * node itself, so that the process the script starts is the one that does the work (a server, a bench) and gets a
 * supervisor's or a user's signals. Behind a launcher such as tsx's CLI, the launcher gets the SIGTERM, relays it,
 * and SIGKILLs a process that has not handled it within about 60 ms (as a loaded machine can make it): a server then
 * dies without its clean stop, and a bench without stopping the servers it started.
 */
export const scriptNodeArguments = (manifest: URL, name: string): Array<string> => {
  const { scripts } = JSON.parse(readFileSync(manifest, "utf8")) as { scripts: Record<string, string | undefined> }
  const script = scripts[name]
  if (script === undefined) throw new Error(`no script ${name} in ${fileURLToPath(manifest)}`)
  if (!script.startsWith("node ")) throw new Error(`the ${name} script is not node itself: ${script}`)
  return script.slice("node ".length).split(" ")
}

/**
 * Sends `signal` to `child` while it is held off the CPU (SIGSTOP) from just before until `heldMillis` after, as a
 * loaded machine can hold a process: long enough for a launcher in between to give up on it (see
 * `scriptNodeArguments`), so only a process started as node itself still handles the signal as it means to.
 */
export const signalWhileHeld = async (child: ChildProcess, signal: NodeJS.Signals, heldMillis = 100): Promise<void> => {
  child.kill("SIGSTOP")
  child.kill(signal)
  await new Promise((resolve) => setTimeout(resolve, heldMillis))
  child.kill("SIGCONT")
}
