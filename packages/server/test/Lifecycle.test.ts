/**
 * The relay as a system over time, as a user meets it with `pnpm start` and no test control: an approved account
 * gets its deposit address from the provider, a whitelisted address is approved by the provider's review, and a
 * transfer approved by two approvers is submitted, broadcast and completed by the provider, all through the
 * outbox worker; afterwards the event log holds every step, in order per entity, with who made it.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DomainEvent, Storage } from "@custody-relay/core"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { startServer } from "./ServerProcess.js"
import * as StorageLayer from "../src/StorageLayer.js"

const directory = mkdtempSync(join(tmpdir(), "relay-lifecycle-"))
afterAll(() => rmSync(directory, { recursive: true, force: true }))

const credentialOf = (output: string, role: string) => {
  const found = new RegExp(`${role}\\s+x-api-key: (\\S+)\\s+x-api-secret: (\\S+)`).exec(output)
  if (found?.[1] === undefined || found[2] === undefined) throw new Error(`no ${role} credential in:\n${output}`)
  return { "x-api-key": found[1], "x-api-secret": found[2] }
}

const call = async (url: string, headers: Record<string, string>, method = "GET", body?: unknown) => {
  const response = await fetch(url, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

/** Asks until `done` holds for the answer, for at most `millis`. */
const eventually = async <A>(ask: () => Promise<A>, done: (a: A) => boolean, millis = 20_000): Promise<A> => {
  const until = Date.now() + millis
  for (;;) {
    const answer = await ask()
    if (done(answer) || Date.now() > until) return answer
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const eventsOf = (database: string, entityId: string) =>
  Effect.runPromise(
    Storage.run("read", (unit) => unit.listEvents({ entityId }, 0, 100)).pipe(
      Effect.provide(StorageLayer.fromDatabase(database))
    )
  )

const summary = (events: ReadonlyArray<DomainEvent.LoggedEvent>) =>
  events.map((e) => [e.type, e.statusBefore, e.statusAfter, e.actor.kind === "api_user" ? e.actor.name : e.actor.kind])

describe("the relay over time, with the live simulated provider", () => {
  it("ACC-ACTIVE-1 WL-STATE-1 TXN-FLOW-1: account, whitelisted address and transfer reach their end states with no test control; the event log holds every step", async () => {
    const database = join(directory, "relay.db")
    const server = await startServer({
      RELAY_DATABASE: database,
      RELAY_DEFAULT_QUORUM: "2",
      RELAY_SIMULATED_STEP_MILLIS: "150",
      RELAY_PROVIDER_POLL_MILLIS: "50"
    })
    let accountId = ""
    let entryId = ""
    let transactionId = ""
    try {
      const output = server.output()
      const initiator = credentialOf(output, "initiator")
      const approvers = [credentialOf(output, "approver-1"), credentialOf(output, "approver-2")]
      const api = `${server.url}/relay/v1`

      const account = await call(`${api}/accounts`, initiator, "POST", { name: "Ops ETH", workspace: "custody", assetId: "ETH" })
      expect(account.status).toBe(201)
      accountId = String(account.body["id"])
      expect((await call(`${api}/accounts/approve`, approvers[0]!, "POST", { accountId })).status).toBe(200)
      const active = await call(`${api}/accounts/${accountId}`, initiator)
      expect(active.body["status"]).toBe("active")
      expect(typeof active.body["address"]).toBe("string")

      const entry = await call(`${api}/whitelisted-addresses`, initiator, "POST", {
        name: "Counterparty",
        address: "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
        assetType: "BTC"
      })
      expect(entry.status).toBe(201)
      expect(entry.body["status"]).toBe("PENDING")
      entryId = String(entry.body["id"])
      const approvedEntry = await eventually(() => call(`${api}/whitelisted-addresses/${entryId}`, initiator), (a) => a.body["status"] === "APPROVED")
      expect(approvedEntry.body["status"]).toBe("APPROVED")

      const accounts = await call(`${api}/accounts?assetId=BTC`, initiator)
      const source = (accounts.body["items"] as ReadonlyArray<Record<string, unknown>>)[0]
      const initiated = await call(`${api}/transactions/initiate`, initiator, "POST", {
        sourceAccountId: source?.["id"],
        destinationId: entryId,
        destinationType: "external",
        amount: "0.25",
        assetType: "BTC"
      })
      expect(initiated.status).toBe(201)
      transactionId = String(initiated.body["id"])
      for (const approver of approvers) {
        expect((await call(`${api}/transactions/${transactionId}/approve`, approver, "POST", {})).status).toBe(200)
      }
      const completed = await eventually(
        () => call(`${api}/transactions/${transactionId}`, initiator),
        (a) => a.body["status"] === "COMPLETED"
      )
      expect(completed.body["status"]).toBe("COMPLETED")
      expect(typeof completed.body["providerTransactionId"]).toBe("string")
      expect(await server.stop()).toBe(0)
    } finally {
      server.child.kill("SIGKILL")
    }

    expect(summary(await eventsOf(database, accountId))).toEqual([
      ["account.created", null, "pending_approval", "demo-initiator"],
      ["account.approved", "pending_approval", "approved", "demo-approver-1"],
      ["account.activated", "approved", "active", "provider"]
    ])
    expect(summary(await eventsOf(database, entryId))).toEqual([
      ["whitelisted_address.created", null, "PENDING", "demo-initiator"],
      ["whitelisted_address.registered", "PENDING", "PENDING", "provider"],
      ["whitelisted_address.approved", "PENDING", "APPROVED", "provider"]
    ])
    expect(summary(await eventsOf(database, transactionId))).toEqual([
      ["transaction.initiated", null, "AWAITING_SIGNATURE", "demo-initiator"],
      ["transaction.approved_by_approver", "AWAITING_SIGNATURE", "AWAITING_SIGNATURE", "demo-approver-1"],
      ["transaction.approved_by_approver", "AWAITING_SIGNATURE", "AWAITING_SIGNATURE", "demo-approver-2"],
      ["transaction.quorum_reached", "AWAITING_SIGNATURE", "PENDING_PROVIDER_APPROVAL", "demo-approver-2"],
      ["transaction.submitted", "PENDING_PROVIDER_APPROVAL", "PENDING_PROVIDER_APPROVAL", "system"],
      ["transaction.provider_approved", "PENDING_PROVIDER_APPROVAL", "BROADCASTING", "provider"],
      ["transaction.broadcast", "BROADCASTING", "CONFIRMING", "provider"],
      ["transaction.completed", "CONFIRMING", "COMPLETED", "provider"]
    ])
  })
})
