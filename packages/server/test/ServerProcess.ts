/**
 * Starts `src/main.ts` as a child process (what `pnpm start` runs) and reads what it prints: its URL, the demo
 * credentials, and everything else for assertions.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { scriptNodeArguments, signalWhileHeld, sourceLoader, sourceNodeArguments } from "../../storage-sql/test/SourceNodeArguments.js"

const packageDir = fileURLToPath(new URL("..", import.meta.url))

export { scriptNodeArguments, signalWhileHeld, sourceLoader, sourceNodeArguments }

export interface ServerProcess {
  readonly url: string
  readonly child: ChildProcess
  readonly output: () => string
  /** Resolves with the exit code once the process has ended. */
  readonly exited: Promise<number | null>
  readonly stop: (signal?: NodeJS.Signals) => Promise<number | null>
}

/**
 * Starts the server; `onOutput` sees everything it prints as it prints it, before it is ready too. `nodeArguments`
 * are node's, from the package's directory.
 */
export const startServer = (
  env: Record<string, string>,
  timeoutMillis = 30_000,
  onOutput: (output: string) => void = () => undefined,
  nodeArguments: ReadonlyArray<string> = [...sourceNodeArguments, "src/main.ts"]
): Promise<ServerProcess> =>
  new Promise((resolve, reject) => {
    // Node itself with a loader, not a launcher such as tsx's: a launcher runs the server as a child of its own, and
    // a SIGKILL sent to the launcher would leave that child serving.
    const child = spawn(process.execPath, nodeArguments, {
      cwd: packageDir,
      env: { ...process.env, PORT: "0", RELAY_LOG_LEVEL: "Warn", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`server did not start in time:\n${output}`))
    }, timeoutMillis)
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      onOutput(output)
      const listening = /listening on (http:\/\/\S+)/.exec(output)
      const ready = output.includes("custody-relay ready")
      if (ready && listening?.[1] !== undefined) {
        clearTimeout(timer)
        resolve({
          url: listening[1],
          child,
          output: () => output,
          exited,
          stop: (signal = "SIGTERM") => {
            child.kill(signal)
            return exited
          }
        })
      }
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8")
      onOutput(output)
    })
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code}:\n${output}`))
    })
  })
