/**
 * Below Node 22.14 the bin stops at once with a message naming the version it needs, instead of a crash without
 * one (better-sqlite3 segfaults on its first query on 22.12 and 22.13). Runs where an older Node is installed
 * beside the one running the tests (the machine's /usr/bin/node, Node 20 on this project's machines).
 */
import { execFile } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { assert, it } from "vitest"

const older = ["/usr/bin/node", "/usr/local/bin/node"].find((path) => existsSync(path))
const version = older === undefined ? undefined : (await promisify(execFile)(older, ["--version"])).stdout.trim()
const tooOld = version !== undefined && /^v(\d+)\.(\d+)/.exec(version) !== null && (() => {
  const [, major, minor] = /^v(\d+)\.(\d+)/.exec(version) ?? []
  return Number(major) < 22 || (Number(major) === 22 && Number(minor) < 14)
})()
if (!tooOld) console.log(`NodeVersion: skipped, no Node older than 22.14 beside this one (found ${version ?? "none"})`)

it.skipIf(!tooOld)("the bin refuses an older Node with a message that names the minimum, exit 1", async () => {
  const outcome = await promisify(execFile)(older ?? "", ["--conditions=@custody-relay/source", "--import", "tsx", "src/main.ts", "--help"], {
    cwd: fileURLToPath(new URL("..", import.meta.url))
  }).then(() => ({ code: 0, stderr: "" }), (error: { code: number; stderr: string }) => error)
  assert.strictEqual(outcome.code, 1)
  assert.include(outcome.stderr, `custody-relay needs Node 22.14 or later; this is Node ${version?.slice(1)}`)
})
