/**
 * A request to a relay handler as one of the demo's API users (seedDemo), in-process through its Web face: what the
 * tests that count a request's round trips or watch its work share.
 */
import type { RelayHandler } from "@custody-relay/http"
import type { DemoCredentials } from "../src/seedDemo.js"

export const asDemoUser = (
  relay: RelayHandler<unknown>,
  demo: DemoCredentials,
  role: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {}
): Promise<Response> => {
  const user = demo.users.find((u) => u.role === role)
  if (user === undefined) throw new Error(`no demo user ${role}`)
  return relay(new Request(`http://relay${path}`, {
    method,
    headers: { "x-api-key": user.keyId, "x-api-secret": user.secret, ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  }))
}

/** The body of an initiation on demo data: 0.00001 BTC from the BTC account `sourceAccountId` to the whitelisted address `destinationId`. */
export const btcTransferOf = (sourceAccountId: string | undefined, destinationId: string) => ({
  sourceAccountId,
  destinationId,
  destinationType: "external",
  amount: "0.00001",
  assetType: "BTC"
})

/** `btcTransferOf` from the demo's BTC account to its whitelisted address. */
export const demoBtcTransfer = (demo: DemoCredentials) =>
  btcTransferOf(demo.accounts.find((a) => a.assetId === "BTC")?.id, demo.whitelistedAddressId)

/**
 * A transfer initiated as the demo's initiator and approved as approver-1, whose one approval is its quorum: the
 * provider's submission is then due in the outbox. Its id; a refusal of either request throws with what was answered.
 */
export const approvedDemoTransfer = async (relay: RelayHandler<unknown>, demo: DemoCredentials, transfer: unknown): Promise<string> => {
  const initiated = await asDemoUser(relay, demo, "initiator", "POST", "/relay/v1/transactions/initiate", transfer)
  if (initiated.status !== 201) throw new Error(`initiate: ${initiated.status} ${await initiated.text()}`)
  const { id } = (await initiated.json()) as { id: string }
  const approved = await asDemoUser(relay, demo, "approver-1", "POST", `/relay/v1/transactions/${id}/approve`)
  if (approved.status !== 200) throw new Error(`approve: ${approved.status} ${await approved.text()}`)
  await approved.text()
  return id
}
