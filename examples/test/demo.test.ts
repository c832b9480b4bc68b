import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { assert, describe, it } from "vitest"

const examples = fileURLToPath(new URL("..", import.meta.url))

describe("examples/demo.ts", () => {
  it("runs the whole flow and every refusal is refused", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ["--conditions=@custody-relay/source", "--import", "tsx", "demo.ts"], { cwd: examples })
    assert.include(stdout, '"status": "COMPLETED"')
    assert.include(stdout, '"reconciled": true')
    assert.include(stdout, "InitiatorCannotApprove")
    assert.notInclude(stdout, "unexpected")
  })
})
