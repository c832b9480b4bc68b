/**
 * Concurrency with real concurrent batches (not simulated interleavings): a server-side race can only be provoked
 * by requests that are in flight together. Outcomes are judged against the model: they must match some
 * sequential order of the same calls (the Jepsen approach).
 */
import { Decimal } from "decimal.js"
import { defineCheck, type CheckContext } from "../Check.js"
import { ControlError } from "../Control.js"
import type { Tenant } from "../Fixtures.js"
import { groupOf, readingsOf } from "../Profile.js"
import { isRecord } from "../Shape.js"
import type { HttpResult } from "../Transport.js"
import { envelopeOf, estimatedFeeText, fundedPair, transfer } from "./records.js"

const rounds = (context: CheckContext): number => Math.max(2, Math.min(8, Math.round(context.settings.numRuns / 3)))

const availableBalance = async (context: CheckContext, tenant: Tenant, accountId: string): Promise<Decimal> => {
  const result = await tenant.client.getAccount(accountId)
  const value = isRecord(result.json) ? result.json["availableBalance"] : undefined
  context.expect(typeof value === "string", "GEN-DEC-1", "availableBalance is not a string", result)
  return new Decimal(String(value))
}

/**
 * Whether accepting exactly the calls in `accepted` (each holding back `costs`) from `balance` matches some
 * sequential order: the accepted fit in the balance and every refused one, needing `needed` (its cost unless the
 * implementation asks for more than it holds back, the fee say), would not have fitted after them.
 */
export const sequentiallyExplainable = (balance: Decimal, costs: ReadonlyArray<Decimal>, accepted: ReadonlyArray<boolean>, needed: ReadonlyArray<Decimal> = costs): boolean => {
  const spent = costs.reduce((sum, cost, index) => (accepted[index] === true ? sum.plus(cost) : sum), new Decimal(0))
  if (spent.gt(balance)) return false
  const left = balance.minus(spent)
  return costs.every((cost, index) => accepted[index] === true || (needed[index] ?? cost).gt(left))
}

export const parallelInitiations = defineCheck({
  id: "concurrency.initiate.no-overspend",
  title: "Parallel initiations that together exceed the balance never overspend and match a sequential order",
  requirements: ["TXN-FLOW-1", "TXN-INIT-1"],
  tags: ["concurrency", "transactions"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  async run(context) {
    for (let round = 0; round < rounds(context); round += 1) {
      const tenant = await context.fixtures.tenant()
      // Funded for one transfer first: whether calculate-fee checks funds is not shown, and it may.
      const amount = "3"
      const { source, destination } = await fundedPair(context, tenant, undefined, "6")
      const fee = await tenant.client.calculateFee(transfer(source, destination.id, amount))
      context.expectStatus(fee, 200, "TXN-FEE-1", "calculate-fee")
      const body = fee.json as Record<string, unknown>
      const sameAsset = body["feeAssetType"] === source.assetId
      const feeInAsset = sameAsset ? new Decimal(estimatedFeeText(fee)) : new Decimal(0)
      const cost = new Decimal(amount).plus(feeInAsset)
      const balance = cost.times(3).plus(cost.div(2)).toDecimalPlaces(context.fixtures.asset(source.assetId).precision, Decimal.ROUND_DOWN)
      await context.control.creditAccount(source.id, balance.minus(6).toFixed())
      const batch = 8
      const results: Array<HttpResult> = await Promise.all(Array.from({ length: batch }, () => tenant.client.initiate(transfer(source, destination.id, amount))))
      const accepted = results.map((result) => result.status === 201)
      for (const result of results) {
        context.expect(result.status === 201 || (result.status >= 400 && result.status < 500 && result.status !== 401 && result.status !== 404), "TXN-FLOW-1", `a parallel initiation answered ${result.status}`, result)
      }
      const count = accepted.filter(Boolean).length
      // What one initiation holds back under each funds reading the profile allows (the fee may wait for completion).
      const held = readingsOf(context.profile).map((reading) => (reading === "amount-and-fee" ? cost : new Decimal(amount)))
      const explained = held.filter((hold) => [hold, cost].some((need) => sequentiallyExplainable(balance, results.map(() => hold), accepted, results.map(() => need))))
      context.expect(
        explained.length > 0,
        "TXN-FLOW-1",
        `${count} of ${batch} parallel initiations of ${cost.toFixed()} each were accepted from a balance of ${balance.toFixed()}: no sequential order explains that`,
        ...results.filter((result) => result.status === 201).slice(0, 2)
      )
      const left = await availableBalance(context, tenant, source.id)
      const expected = explained.map((hold) => balance.minus(hold.times(count)))
      context.expect(left.gte(0) && expected.some((value) => left.eq(value)), "TXN-FLOW-1", `after ${count} accepted initiation(s) the available balance is ${left.toFixed()}, expected ${expected.map((value) => value.toFixed()).join(" or ")}`)
      const listed = envelopeOf(context, await tenant.client.listTransactions({ accountId: source.id }), "TXN-FLOW-1", "GET /transactions")
      context.expect(listed.total === count, "TXN-FLOW-1", `${count} initiation(s) were accepted but ${listed.total} transaction(s) are stored`)
    }
  }
})

export const parallelDecisions = defineCheck({
  id: "concurrency.account.approve-reject",
  title: "Parallel approve and reject of one account: exactly one succeeds and the account shows the winner",
  requirements: ["ACC-APPR-2", "ACC-APPR-1"],
  tags: ["concurrency", "accounts"],
  needs: ["control"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    for (let round = 0; round < rounds(context) * 2; round += 1) {
      const account = await context.fixtures.pendingAccount(tenant)
      const calls = round % 2 === 0 ? (["approve", "reject", "approve"] as const) : (["reject", "approve", "reject"] as const)
      const results = await Promise.all(calls.map((call) => (call === "approve" ? tenant.client.approveAccount(account.id) : tenant.client.rejectAccount(account.id))))
      const winners = results.map((result, index) => ({ result, call: calls[index] })).filter(({ result }) => result.status === 200 || result.status === 201)
      context.expect(winners.length === 1, "ACC-APPR-2", `${winners.length} of ${calls.length} parallel decisions on one account succeeded`, ...results)
      for (const result of results) {
        context.expect([200, 201, 400, 409].includes(result.status), "ACC-APPR-2", `a parallel decision answered ${result.status}`, result)
      }
      const winner = winners[0]
      if (winner === undefined) continue
      const read = await tenant.client.getAccount(account.id)
      const expected = winner.call === "approve" ? "approved" : "rejected"
      const status = isRecord(read.json) ? read.json["status"] : undefined
      context.expect(status === expected || (expected === "approved" && status === "active"), "ACC-APPR-2", `the ${winner.call} won but the account reads ${String(status)}`, read)
    }
  }
})

export const parallelAdvances = defineCheck({
  id: "concurrency.transaction.advance",
  title: "Parallel advance to completed and to failed: exactly one wins (409 for the other) and funds follow the winner",
  requirements: ["TXN-FLOW-1", "TXN-LIST-2"],
  tags: ["concurrency", "transactions"],
  needs: ["control", "accounts.activate", "accounts.credit", "transactions.advance"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const { source, destination } = await fundedPair(context, tenant, undefined, "1000")
    for (let round = 0; round < rounds(context); round += 1) {
      const initiate = await tenant.client.initiate(transfer(source, destination.id, "2"))
      context.expectStatus(initiate, 201, "TXN-INIT-1", "initiate")
      const id = String((initiate.json as Record<string, unknown>)["id"])
      const detail = await tenant.client.getTransaction(id)
      const networkFee = isRecord(detail.json) && typeof detail.json["networkFee"] === "string" ? new Decimal(detail.json["networkFee"]) : new Decimal(0)
      const fee = await tenant.client.calculateFee(transfer(source, destination.id, "2"))
      const feeCharged = isRecord(fee.json) && fee.json["feeAssetType"] === source.assetId ? networkFee : new Decimal(0)
      const sourceBefore = await availableBalance(context, tenant, source.id)
      const destinationBefore = await availableBalance(context, tenant, destination.id)
      const targets = round % 2 === 0 ? (["completed", "failed"] as const) : (["failed", "completed"] as const)
      const outcomes = await Promise.all(
        targets.map(async (to) => {
          try {
            await context.control.advanceTransaction(id, to)
            return { to, status: 200 }
          } catch (error) {
            if (error instanceof ControlError) return { to, status: error.status }
            throw error
          }
        })
      )
      const winners = outcomes.filter((outcome) => outcome.status === 200)
      context.expect(winners.length === 1, "TXN-FLOW-1", `${winners.length} of 2 parallel advances succeeded (${outcomes.map((o) => `${o.to}: ${o.status}`).join(", ")})`)
      context.expect(outcomes.every((outcome) => outcome.status === 200 || outcome.status === 409), "TXN-FLOW-1", `the losing advance should be 409: ${outcomes.map((o) => `${o.to}: ${o.status}`).join(", ")}`)
      const winner = winners[0]
      if (winner === undefined) continue
      const read = await tenant.client.getTransactionStatus(id)
      const status = isRecord(read.json) ? String(read.json["status"]) : ""
      context.expect(groupOf(context.profile, status) === winner.to, ["TXN-FLOW-1", "TXN-LIST-2"], `advance to ${winner.to} won but the transaction reads ${status}`, read)
      const sourceAfter = await availableBalance(context, tenant, source.id)
      const destinationAfter = await availableBalance(context, tenant, destination.id)
      if (winner.to === "failed") {
        context.expect(sourceAfter.gt(sourceBefore) && destinationAfter.eq(destinationBefore), "TXN-FLOW-1", `a failed transaction should release its reservation: source ${sourceBefore.toFixed()} -> ${sourceAfter.toFixed()}, destination ${destinationBefore.toFixed()} -> ${destinationAfter.toFixed()}`)
      } else {
        // Completion charges nothing more where initiation held back the fee, and the fee where it did not.
        const settled = readingsOf(context.profile).map((reading) => (reading === "amount-and-fee" ? sourceBefore : sourceBefore.minus(feeCharged)))
        context.expect(settled.some((value) => sourceAfter.eq(value)) && destinationAfter.eq(destinationBefore.plus(2)), "TXN-FLOW-1", `a completed transaction should settle: source ${sourceBefore.toFixed()} -> ${sourceAfter.toFixed()}, destination ${destinationBefore.toFixed()} -> ${destinationAfter.toFixed()}`)
      }
    }
  }
})

export const concurrencyChecks = [parallelInitiations, parallelDecisions, parallelAdvances]
