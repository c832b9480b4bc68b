/**
 * ERR-CODE-1: the one error table maps every refusal to a status of the interface's meaning, each code is unique,
 * and docs/http.md shows exactly this table (regenerate it with ErrorTable.toMarkdown() when this test fails).
 */
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { ErrorTable } from "../src/index.js"

const docs = readFileSync(new URL("../../../docs/http.md", import.meta.url), "utf8")

describe("error table", () => {
  it("ERR-CODE-1: statuses keep the interface's meanings", () => {
    const t = ErrorTable.errorTable
    expect(t.Unauthenticated.status).toBe(401)
    expect([t.PermissionDenied.status, t.CredentialNotClientScoped.status]).toEqual([403, 403])
    expect([t.NotFound.status, t.DestinationNotFound.status]).toEqual([404, 404])
    expect([t.DuplicateAccount.status, t.TransitionNotAllowed.status]).toEqual([409, 409])
    expect(t.RateLimited.status).toBe(429)
    expect(t.CustodyProviderFailed.status).toBe(500)
    for (const tag of ["InvalidRequest", "UnsupportedAsset", "InvalidAmount", "InvalidAddress", "AssetMismatch", "FeeEstimationUnsupported"] as const) {
      expect(t[tag].status, tag).toBe(400)
    }
  })

  it("ERR-BODY-1: every code is unique and machine-readable", () => {
    const codes = Object.values(ErrorTable.errorTable).map((m) => m.code)
    expect(new Set(codes).size).toBe(codes.length)
    for (const code of codes) expect(code).toMatch(/^[A-Z][A-Z0-9_]+$/)
  })

  it("ERR-CODE-1: docs/http.md shows exactly this table", () => {
    expect(docs).toContain(ErrorTable.toMarkdown())
  })
})
