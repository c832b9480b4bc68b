/** Log lines as the JSON logger writes them, parsed, for tests of what a program logs; every package's tests use it. */
import { Logger } from "effect"

/** The lines logged through `layer`, as `Logger.formatJson` writes them, parsed. */
export const capturedLogs = () => {
  const lines: Array<{ readonly level: string; readonly message: unknown; readonly annotations: Record<string, unknown> }> = []
  const logger = Logger.make((entry) => {
    lines.push(JSON.parse(Logger.formatJson.log(entry)))
  })
  return { lines, layer: Logger.layer([logger]) }
}
