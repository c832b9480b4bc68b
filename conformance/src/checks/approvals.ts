/**
 * The quorum workflow of transactions, which the interface names ("Approve transaction", "enters a quorum-based
 * approval workflow", TXN-INIT-2) but leaves to the profile (TXN-FLOW-1: quorum rules). Checked when the profile
 * declares its policy (`approvals.required`) and, for decisions, the calls that approve and reject
 * (`approvals.approve`, `approvals.reject`): the initiator never counts, approvers are distinct, the quorum is
 * reached exactly at N, one rejection ends it and releases the funds, the permission's exact 403, and decisions
 * that race.
 */
import { Decimal } from "decimal.js"
import { defineCheck, NotDeclared, type CheckContext } from "../Check.js"
import { allPermissions, permissions } from "../Endpoints.js"
import type { Tenant } from "../Fixtures.js"
import { fillTemplate, groupOf, type ApprovalPolicy, type CallTemplate } from "../Profile.js"
import { isRecord } from "../Shape.js"
import type { HttpResult } from "../Transport.js"
import { envelopeOf, fundedPair, idsOf, isClientError, randomUuid, transfer } from "./records.js"

const awaiting = "AWAITING_SIGNATURE"

/** What a decision was answered: its status, and the exchange when it went over the interface. */
interface Decision {
  readonly status: number
  readonly evidence: ReadonlyArray<HttpResult>
}

interface Decisions {
  readonly policy: ApprovalPolicy
  /** Whether decisions go through the implementation's own endpoints (not the control protocol). */
  readonly overTheInterface: boolean
  readonly approve: (approver: Tenant, id: string) => Promise<Decision>
  readonly reject: (approver: Tenant, id: string) => Promise<Decision>
}

/** A decision over the implementation's own endpoint, as the profile's template writes it. */
const overEndpoint = (template: CallTemplate) => (approver: Tenant, id: string): Promise<HttpResult> => {
  const filled = fillTemplate(template, id)
  return approver.client.raw(filled.method, filled.path, filled.body)
}

const viaEndpoint = (template: CallTemplate) => async (approver: Tenant, id: string): Promise<Decision> => {
  const result = await overEndpoint(template)(approver, id)
  return { status: result.status, evidence: [result] }
}

const viaControl = (context: CheckContext, decision: "approve" | "reject") => async (approver: Tenant, id: string): Promise<Decision> => {
  if (approver.apiUser === undefined) throw new NotDeclared("approval endpoints (a black-box run cannot decide through the control)")
  return { status: (await context.control.decideTransaction(id, approver.apiUser.apiUserId, decision)).status, evidence: [] }
}

/**
 * The declared policy and how to decide: the implementation's endpoints when the profile gives their templates,
 * else the control protocol's `transactions.decide` (not-applicable when neither is offered).
 */
const decisionsOf = (context: CheckContext): Decisions => {
  const policy = context.profile.approvals
  if (policy === undefined) throw new NotDeclared("approvals (the approval policy and how a transaction is approved)")
  if (policy.approve !== undefined && policy.reject !== undefined) {
    return { policy, overTheInterface: true, approve: viaEndpoint(policy.approve), reject: viaEndpoint(policy.reject) }
  }
  return { policy, overTheInterface: false, approve: viaControl(context, "approve"), reject: viaControl(context, "reject") }
}

const policyOf = (context: CheckContext): ApprovalPolicy => {
  const policy = context.profile.approvals
  if (policy === undefined) throw new NotDeclared("approvals.required (the approval policy)")
  return policy
}

const statusOf = async (context: CheckContext, tenant: Tenant, id: string): Promise<string> => {
  const result = await tenant.client.getTransactionStatus(id)
  context.expectStatus(result, 200, "TXN-GET-1", "GET /transactions/{id}/status")
  return isRecord(result.json) ? String(result.json["status"]) : ""
}

const balanceOf = async (context: CheckContext, tenant: Tenant, accountId: string): Promise<Decimal> => {
  const result = await tenant.client.getAccount(accountId)
  context.expectStatus(result, 200, "ACC-GET-1", "GET /accounts/{id}")
  return new Decimal(isRecord(result.json) && typeof result.json["availableBalance"] === "string" ? result.json["availableBalance"] : "NaN")
}

/**
 * The transaction is listed under exactly the status group the profile puts `status` in, and under no other
 * (TXN-LIST-2): the workflow reaches statuses (awaiting its provider, rejected) that advancing through the control
 * protocol never does, so the groups are checked for them here. The tenant is the check's own: its lists are short.
 */
const listedInItsGroup = async (context: CheckContext, tenant: Tenant, id: string, status: string): Promise<void> => {
  const declared = groupOf(context.profile, status)
  for (const group of ["pending", "completed", "failed"] as const) {
    const result = await tenant.client.listTransactions({ status: group })
    const listed = idsOf(envelopeOf(context, result, "TXN-LIST-2", `GET /transactions?status=${group}`)).includes(id)
    context.expect(
      listed === (group === declared),
      "TXN-LIST-2",
      listed
        ? `a ${status} transaction is listed under status=${group}; the profile puts ${status} in ${declared ?? "no group"}`
        : `a ${status} transaction is missing from status=${group}, the group the profile puts it in`,
      result
    )
  }
}

/** A refusal of a decision: a 4xx other than 401 and 429, which say nothing about the workflow. */
const refused = (result: { readonly status: number }): boolean => isClientError(result.status) && result.status !== 401 && result.status !== 429
const accepted = (result: { readonly status: number }): boolean => result.status >= 200 && result.status < 300

/** A tenant (the initiator, with every permission), approvers of the same client, and a new transaction. */
const workflow = async (context: CheckContext, approvers: number) => {
  const initiator = await context.fixtures.tenant()
  const others: Array<Tenant> = []
  for (let index = 0; index < approvers; index += 1) others.push(await context.fixtures.user(initiator, allPermissions))
  const { source, destination } = await fundedPair(context, initiator, undefined, "100")
  const before = await balanceOf(context, initiator, source.id)
  const initiate = await initiator.client.initiate(transfer(source, destination.id, "1"))
  context.expectStatus(initiate, 201, "TXN-INIT-1", "initiate")
  const id = String((initiate.json as Record<string, unknown>)["id"])
  return { initiator, approvers: others, source, id, before, initiate }
}

/** The first N-1 distinct approvers approve, each accepted: the transaction is one decision short of its quorum. */
const oneShortOfQuorum = async (context: CheckContext, decisions: Decisions, flow: { readonly approvers: ReadonlyArray<Tenant>; readonly id: string }): Promise<void> => {
  for (let index = 0; index < decisions.policy.required - 1; index += 1) {
    const answer = await decisions.approve(flow.approvers[index]!, flow.id)
    context.expect(accepted(answer), "TXN-FLOW-1", `approval ${index + 1} of ${decisions.policy.required} by a distinct approver answered ${answer.status}`, ...answer.evidence)
  }
}

export const initiateFollowsPolicy = defineCheck({
  id: "txn.approval.policy",
  title: "A new transaction awaits signature exactly when the declared policy requires approvals",
  requirements: ["TXN-INIT-2", "TXN-FLOW-1"],
  tags: ["transactions", "approvals", "workflow", "profile"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  async run(context) {
    const policy = policyOf(context)
    const { initiator, id, initiate } = await workflow(context, 0)
    const initial = String((initiate.json as Record<string, unknown>)["status"]).toUpperCase()
    if (policy.required > 0) {
      context.expect(initial === awaiting, "TXN-INIT-2", `the profile requires ${policy.required} approval(s): a new transaction should be awaiting_signature, got ${initial.toLowerCase()}`, initiate)
    } else {
      context.expect(initial !== awaiting && groupOf(context.profile, initial) !== "failed", "TXN-FLOW-1", `the profile requires no approval: a new transaction should not await a signature, got ${initial.toLowerCase()}`, initiate)
    }
    context.expect((await statusOf(context, initiator, id)) === initial, "TXN-FLOW-1", "the read status differs from the initiate status")
  }
})

export const quorum = defineCheck({
  id: "txn.approval.quorum",
  title: "The initiator never counts, each approver counts once, and the quorum is reached exactly at N, listed in its group",
  requirements: ["TXN-FLOW-1", "TXN-INIT-2", "TXN-LIST-2"],
  tags: ["transactions", "approvals", "workflow", "profile"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  async run(context) {
    const { policy, approve } = decisionsOf(context)
    const { initiator, approvers, id } = await workflow(context, policy.required + 1)
    if (policy.required === 0) {
      const late = await approve(approvers[0]!, id)
      context.expect(refused(late), "TXN-FLOW-1", `approving a transaction that needs no approval answered ${late.status}`, ...late.evidence)
      return
    }
    const own = await approve(initiator, id)
    context.expect(refused(own), "TXN-FLOW-1", `the initiator approved their own transaction (answered ${own.status}); the initiator never counts toward the quorum`, ...own.evidence)
    context.expect((await statusOf(context, initiator, id)) === awaiting, "TXN-FLOW-1", "the initiator's own approval moved the transaction")
    for (let index = 0; index < policy.required; index += 1) {
      const approver = approvers[index]!
      const answer = await approve(approver, id)
      context.expect(accepted(answer), "TXN-FLOW-1", `approval ${index + 1} of ${policy.required} by a distinct approver answered ${answer.status}`, ...answer.evidence)
      const after = await statusOf(context, initiator, id)
      if (index + 1 < policy.required) {
        context.expect(after === awaiting, "TXN-FLOW-1", `after ${index + 1} of ${policy.required} approvals the transaction reads ${after}, not ${awaiting}`, ...answer.evidence)
        const again = await approve(approver, id)
        context.expect(refused(again) || accepted(again), "TXN-FLOW-1", `a second approval by the same approver answered ${again.status}`, ...again.evidence)
        const still = await statusOf(context, initiator, id)
        context.expect(still === awaiting, "TXN-FLOW-1", `the same approver approving twice reached the quorum of ${policy.required} (reads ${still})`, ...again.evidence)
      } else {
        context.expect(after !== awaiting && groupOf(context.profile, after) !== "failed", "TXN-FLOW-1", `after the ${policy.required}th approval the transaction reads ${after}; the quorum was reached`, ...answer.evidence)
        await listedInItsGroup(context, initiator, id, after)
      }
    }
    const past = await statusOf(context, initiator, id)
    const extra = await approve(approvers[policy.required]!, id)
    context.expect(refused(extra), "TXN-FLOW-1", `an approval after the quorum answered ${extra.status}`, ...extra.evidence)
    context.expect((await statusOf(context, initiator, id)) === past, "TXN-FLOW-1", "an approval after the quorum changed the transaction")
  }
})

export const rejection = defineCheck({
  id: "txn.approval.rejection",
  title: "One rejection ends the workflow, releases the funds, and no decision follows it",
  requirements: ["TXN-FLOW-1", "TXN-LIST-2"],
  tags: ["transactions", "approvals", "workflow", "profile"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  async run(context) {
    const decisions = decisionsOf(context)
    const { policy, approve, reject } = decisions
    if (policy.required === 0) throw new NotDeclared("a policy that requires approvals (approvals.required is 0)")
    const flow = await workflow(context, policy.required + 1)
    const { initiator, approvers, id, source, before } = flow
    // One approval short of the quorum when the quorum is above one, so the rejection comes mid-way.
    await oneShortOfQuorum(context, decisions, flow)
    const no = await reject(approvers[policy.required - 1]!, id)
    context.expect(accepted(no), "TXN-FLOW-1", `a rejection by an approver answered ${no.status}`, ...no.evidence)
    const after = await statusOf(context, initiator, id)
    context.expect(groupOf(context.profile, after) === "failed", ["TXN-FLOW-1", "TXN-LIST-2"], `a rejected transaction reads ${after}, which the profile does not put in the failed group`, ...no.evidence)
    await listedInItsGroup(context, initiator, id, after)
    const released = await balanceOf(context, initiator, source.id)
    context.expect(released.eq(before), "TXN-FLOW-1", `after the rejection the source has ${released.toString()} available, ${before.toString()} before the initiation: the reservation was not released`, ...no.evidence)
    const late = await approve(approvers[policy.required]!, id)
    context.expect(refused(late), "TXN-FLOW-1", `an approval after the rejection answered ${late.status}`, ...late.evidence)
    context.expect((await statusOf(context, initiator, id)) === after, "TXN-FLOW-1", "an approval after the rejection changed the transaction", ...late.evidence)
  }
})

export const decisionPermission = defineCheck({
  id: "txn.approval.permission",
  title: "Deciding needs \"Approve transaction\" (the exact 403), stays in the client's scope, and ids are checked",
  requirements: ["AUTH-PERM-1", "SCOPE-1", "TXN-FLOW-1"],
  tags: ["transactions", "approvals", "auth", "scope"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  async run(context) {
    const { policy } = decisionsOf(context)
    // The permission is the endpoints' (a decision through the control protocol has none to check).
    if (policy.approve === undefined || policy.reject === undefined) throw new NotDeclared("approvals.approve and approvals.reject (the endpoints whose permission this checks)")
    const { initiator, id } = await workflow(context, 0)
    const status = await statusOf(context, initiator, id)
    const without = await context.fixtures.user(initiator, allPermissions.filter((permission) => permission !== permissions.approveTransaction))
    const expected = { message: `Missing required API scope: ${permissions.approveTransaction}` }
    for (const [what, decide] of [["approve", overEndpoint(policy.approve)], ["reject", overEndpoint(policy.reject)]] as const) {
      const answer = await decide(without, id)
      context.expect(
        answer.status === 403 && isRecord(answer.json) && Object.keys(answer.json).length === 1 && answer.json["message"] === expected.message,
        "AUTH-PERM-1",
        `${what} without "${permissions.approveTransaction}" should be 403 ${JSON.stringify(expected)}, got ${answer.status} ${answer.text.slice(0, 120)}`,
        answer
      )
      const stranger = await context.fixtures.otherTenant()
      const foreign = await decide(stranger, id)
      context.expect(foreign.status === 404, "SCOPE-1", `${what} by another client's approver answered ${foreign.status}, not 404`, foreign)
      const unknown = await decide(stranger, randomUuid())
      context.expect(unknown.status === 404, "SCOPE-1", `${what} of an unknown transaction answered ${unknown.status}, not 404`, unknown)
    }
    context.expect((await statusOf(context, initiator, id)) === status, "TXN-FLOW-1", `refused decisions changed the transaction (policy: ${policy.required} approval(s))`)
  }
})

export const racingDecisions = defineCheck({
  id: "txn.approval.concurrent",
  title: "Decisions that race: the last approval counts once, and an approval racing a rejection leaves one consistent outcome",
  requirements: ["TXN-FLOW-1"],
  tags: ["transactions", "approvals", "concurrency", "workflow"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  async run(context) {
    const decisions = decisionsOf(context)
    const { policy, approve, reject } = decisions
    if (policy.required === 0) throw new NotDeclared("a policy that requires approvals (approvals.required is 0)")
    for (let round = 0; round < 3; round += 1) {
      // Two approvers race for the last approval: exactly one is the quorum, the other is too late.
      const last = await workflow(context, policy.required + 1)
      await oneShortOfQuorum(context, decisions, last)
      const racers = last.approvers.slice(policy.required - 1, policy.required + 1)
      const answers = await Promise.all(racers.map((approver) => approve(approver, last.id)))
      const wins = answers.filter(accepted).length
      context.expect(wins === 1, "TXN-FLOW-1", `two approvers raced for the last of ${policy.required} approval(s): ${wins} were accepted (${answers.map((answer) => answer.status).join(", ")}), exactly one should be`, ...answers.flatMap((answer) => answer.evidence))
      const after = await statusOf(context, last.initiator, last.id)
      context.expect(after !== awaiting && groupOf(context.profile, after) !== "failed", "TXN-FLOW-1", `after the race the transaction reads ${after}`)

      // An approval and a rejection race for the last decision: whichever is accepted decides, and the other is refused.
      const split = await workflow(context, policy.required + 1)
      await oneShortOfQuorum(context, decisions, split)
      const [yes, no] = await Promise.all([approve(split.approvers[policy.required - 1]!, split.id), reject(split.approvers[policy.required]!, split.id)])
      context.expect(accepted(yes) !== accepted(no), "TXN-FLOW-1", `an approval (${yes.status}) and a rejection (${no.status}) raced for the last decision: exactly one should be accepted`, ...yes.evidence, ...no.evidence)
      const outcome = await statusOf(context, split.initiator, split.id)
      const failed = groupOf(context.profile, outcome) === "failed"
      context.expect(failed === accepted(no), "TXN-FLOW-1", `the ${accepted(no) ? "rejection" : "approval"} was accepted but the transaction reads ${outcome}`, ...yes.evidence, ...no.evidence)
      const balance = await balanceOf(context, split.initiator, split.source.id)
      if (failed) context.expect(balance.eq(split.before), "TXN-FLOW-1", `the rejection won but the source has ${balance.toString()} available, not ${split.before.toString()}`)
    }
  }
})

export const approvalChecks = [initiateFollowsPolicy, quorum, rejection, decisionPermission, racingDecisions]
