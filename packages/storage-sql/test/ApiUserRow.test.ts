import { describe, expect, it } from "vitest"
import * as ApiUserRow from "../src/rows/ApiUserRow.js"
import type { ApiUsersTable } from "../src/schema/Database.js"
import * as Records from "./Records.js"

const row = (permissions: string): ApiUsersTable => ({ ...ApiUserRow.encode(Records.apiUser(null)), permissions })

describe("ApiUserRow", () => {
  it("AUTH-PERM-2: reads the stored permission list back as written", () => {
    expect(ApiUserRow.decode(row(JSON.stringify(["View custody account", "Approve transaction"]))).permissions)
      .toEqual(["View custody account", "Approve transaction"])
    expect(ApiUserRow.decode(row("[]")).permissions).toEqual([])
  })

  it("refuses a stored list that is not JSON, not a list, or not of names", () => {
    for (const stored of ["{", "{}", "\"View custody account\"", "[1]", "[\"View custody account\", null]"]) {
      expect(() => ApiUserRow.decode(row(stored)), stored).toThrow()
    }
  })

  it("AUTH-PERM-1: a name this release does not know (a later release's permission, during a rolling upgrade) grants nothing and fails nothing", () => {
    expect(ApiUserRow.decode(row(JSON.stringify(["View custody account", "Settle on chain"]))).permissions).toEqual(["View custody account"])
    expect(ApiUserRow.decode(row(JSON.stringify(["Root"]))).permissions).toEqual([])
  })
})
