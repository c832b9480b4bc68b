/**
 * The deliberately faulty variants of a correct server, each a wrapper around its handler, with the requirement id
 * the kit must report it under.
 */
import { Decimal } from "decimal.js"
import { FakeRelay, type FakeFault, type FakeVariant } from "../reference/FakeRelay.js"
import { hexOf, sha256 } from "../Digest.js"
import { askAt, control, isObject, pathOf, precisionOf, readJsonBody, rewrite, withBody, type Fault } from "./wrap.js"

const isTransfer = (request: Request): boolean => request.method === "POST" && /\/relay\/v1\/transactions\/(initiate|calculate-fee)$/.test(pathOf(request))
const isTransactionList = (request: Request): boolean => request.method === "GET" && pathOf(request).endsWith("/relay/v1/transactions")
const isList = (request: Request): boolean => request.method === "GET" && /\/relay\/v1\/(accounts|transactions|whitelisted-addresses)$/.test(pathOf(request))
const byIdRead = /\/relay\/v1\/(accounts|transactions|whitelisted-addresses)\/[^/]+(\/status)?$/

/**
 * Faults only an implementation can make (a state it keeps wrongly), made by the spec-written fake with one fault
 * switched on: the quorum workflow and destination rules. They ignore the handler they are given.
 */
const fake = (name: string, requirement: string, fault: FakeFault, variant: FakeVariant, checks?: ReadonlyArray<string>): Fault => ({
  name,
  requirement,
  target: "fake",
  ...(checks === undefined ? {} : { checks }),
  wrap: (_handler, { token }) => new FakeRelay({ token, variant, fault }).handler
})

const fakeFaults: ReadonlyArray<Fault> = [
  fake("the initiator may approve their own transaction", "TXN-FLOW-1", "initiator-approves", { quorum: 1 }, ["txn.approval.quorum"]),
  fake("one approver approving twice counts twice", "TXN-FLOW-1", "approver-counted-twice", { quorum: 2 }, ["txn.approval.quorum"]),
  fake("the quorum is reached one approval early", "TXN-FLOW-1", "quorum-one-early", { quorum: 2 }, ["txn.approval.quorum"]),
  fake("a rejection is answered 200 and ignored", "TXN-FLOW-1", "rejection-ignored", { quorum: 2 }, ["txn.approval.rejection"]),
  fake("a rejected transaction keeps its funds reserved", "TXN-FLOW-1", "rejection-keeps-funds", { quorum: 1 }, ["txn.approval.rejection"]),
  fake("deciding needs \"Initiate account transactions\" instead of \"Approve transaction\"", "AUTH-PERM-1", "approval-needs-initiate-permission", { quorum: 1 }, ["txn.approval.permission"]),
  fake("two decisions in flight both count", "TXN-FLOW-1", "decisions-race", { quorum: 1 }, ["txn.approval.concurrent"]),
  fake("a transaction awaits a signature under a policy of no approvals", "TXN-FLOW-1", "awaiting-without-policy", { quorum: 0 }, ["txn.approval.policy"]),
  fake("an internal transfer to its own source account is accepted", "TXN-DEST-2", "self-transfer", {}, ["txn.destination.internal"]),
  fake("a destination of another asset is accepted", "TXN-DEST-1", "cross-asset-destination", {}, ["txn.destination.external"])
]

export const faults: ReadonlyArray<Fault> = [
  {
    name: "precision off by one: an over-precise amount is truncated and accepted",
    requirement: "TXN-PREC-2",
    checks: ["txn.precision.boundary"],
    wrap: (handler, { token }) => {
      let precision: Map<string, number> | undefined
      return async (request) => {
        if (!isTransfer(request)) return handler(request)
        precision ??= await precisionOf(handler, token)
        const { request: copy, body } = await readJsonBody(request)
        if (!isObject(body) || typeof body["amount"] !== "string" || !/^\d+\.\d+$/.test(body["amount"])) return handler(copy)
        const places = precision.get(String(body["assetType"])) ?? 8
        const [whole, fraction = ""] = body["amount"].split(".")
        if (fraction.length !== places + 1) return handler(copy)
        return handler(withBody(copy, { ...body, amount: `${whole}.${fraction.slice(0, places)}` }))
      }
    }
  },
  {
    name: "scientific notation accepted: an exponent amount is rewritten to plain",
    requirement: "TXN-PREC-1",
    checks: ["txn.amount.malformed"],
    wrap: (handler) => async (request) => {
      if (!isTransfer(request)) return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      if (!isObject(body) || typeof body["amount"] !== "string" || !/^\d+(\.\d+)?[eE][-+]?\d+$/.test(body["amount"])) return handler(copy)
      return handler(withBody(copy, { ...body, amount: new Decimal(body["amount"]).toFixed() }))
    }
  },
  {
    name: "a foreign id answered 403 instead of 404",
    requirement: "SCOPE-1",
    checks: ["scope.foreign-ids"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method === "GET" && byIdRead.test(pathOf(request)) && response.status === 404) return rewrite(response, (body) => body, 403)
      return response
    }
  },
  {
    name: "a second approve of an account accepted",
    requirement: "ACC-APPR-2",
    checks: ["acc.approve.processed"],
    wrap: (handler) => async (request) => {
      if (request.method !== "POST" || !pathOf(request).endsWith("/accounts/approve")) return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      const response = await handler(copy)
      if (response.status === 409 || response.status === 400) return rewrite(response, () => ({ accountId: isObject(body) ? body["accountId"] : null, status: "approved" }), 200)
      return response
    }
  },
  {
    name: "a wrong 403 message for a missing permission",
    requirement: "AUTH-PERM-1",
    checks: ["auth.permission.matrix"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (response.status !== 403) return response
      return rewrite(response, (body) => (isObject(body) && typeof body["message"] === "string" ? { message: body["message"].replace("Missing required API scope", "Forbidden: missing scope") } : body))
    }
  },
  {
    name: "list totals counting other clients' records",
    requirement: "SCOPE-2",
    checks: ["scope.lists"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (!isList(request) || response.status !== 200) return response
      return rewrite(response, (body) => (isObject(body) && typeof body["total"] === "number" ? { ...body, total: body["total"] + 1 } : body))
    }
  },
  {
    name: "a pending whitelisted address usable as a destination",
    requirement: "TXN-DEST-1",
    checks: ["txn.destination.external"],
    wrap: (handler, { token }) => async (request) => {
      if (!isTransfer(request)) return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      if (isObject(body) && body["destinationType"] === "external" && typeof body["destinationId"] === "string") {
        const read = await handler(new Request(new URL(`/relay/v1/whitelisted-addresses/${body["destinationId"]}`, copy.url), { headers: copy.headers }))
        const entry = read.status === 200 ? ((await read.json()) as unknown) : undefined
        if (isObject(entry) && entry["status"] === "PENDING") await control(handler, token, "POST", `/whitelisted-addresses/${body["destinationId"]}/status`, { status: "APPROVED" })
      }
      return handler(copy)
    }
  },
  {
    name: "rate-limit headers missing on 429",
    requirement: "LIM-RATE-1",
    checks: ["limit.rate.burst"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (response.status !== 429) return response
      const headers = new Headers(response.headers)
      for (const name of ["retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"]) headers.delete(name)
      return new Response(await response.text(), { status: 429, headers })
    }
  },
  {
    name: "calculate-fee storing a transaction",
    requirement: "TXN-FEE-1",
    checks: ["txn.fee.no-side-effect"],
    wrap: (handler) => async (request) => {
      if (request.method !== "POST" || !pathOf(request).endsWith("/transactions/calculate-fee")) return handler(request)
      const { request: copy } = await readJsonBody(request)
      const text = await copy.clone().text()
      await handler(new Request(copy.url.replace("calculate-fee", "initiate"), { method: "POST", headers: copy.headers, body: text }))
      return handler(copy)
    }
  },
  {
    name: "overspend under concurrency: the source is credited before each initiation",
    requirement: "TXN-FLOW-1",
    checks: ["concurrency.initiate.no-overspend"],
    wrap: (handler, { token }) => async (request) => {
      if (request.method !== "POST" || !pathOf(request).endsWith("/transactions/initiate")) return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      if (isObject(body) && typeof body["sourceAccountId"] === "string" && typeof body["amount"] === "string" && /^\d+(\.\d+)?$/.test(body["amount"])) {
        await control(handler, token, "POST", `/accounts/${body["sourceAccountId"]}/credit`, { amount: new Decimal(body["amount"]).times(2).toFixed() })
      }
      return handler(copy)
    }
  },
  {
    name: "status case wrong: read responses carry lower-case transaction statuses",
    requirement: "TXN-SHAPE-1",
    checks: ["txn.shape.records"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "GET" || !pathOf(request).includes("/relay/v1/transactions") || response.status !== 200) return response
      const lower = (record: unknown): unknown => (isObject(record) && typeof record["status"] === "string" ? { ...record, status: record["status"].toLowerCase() } : record)
      return rewrite(response, (body) => (isObject(body) && Array.isArray(body["items"]) ? { ...body, items: body["items"].map(lower) } : lower(body)))
    }
  },
  {
    name: "a secret echoed in an error body",
    requirement: "AUTH-SEC-1",
    checks: ["auth.secret.not-exposed"],
    wrap: (handler) => async (request) => {
      const secret = request.headers.get("x-api-secret")
      const response = await handler(request)
      if (response.status < 400 || secret === null || response.status === 401) return response
      return rewrite(response, (body) => (isObject(body) ? { ...body, detail: `request authenticated with ${secret}` } : body))
    }
  },
  {
    name: "a 401 echoes the credential it refused in a header",
    requirement: "AUTH-SEC-1",
    checks: ["auth.secret.not-exposed"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      const secret = request.headers.get("x-api-secret")
      if (response.status !== 401 || secret === null) return response
      const headers = new Headers(response.headers)
      headers.set("x-refused-credential", `${request.headers.get("x-api-key") ?? ""}:${secret}`)
      return new Response(await response.text(), { status: 401, headers })
    }
  },
  {
    name: "an answer carries the SHA-256 of the secret it was sent, as an implementation stores it",
    requirement: "AUTH-SEC-1",
    checks: ["auth.secret.not-exposed"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      const secret = request.headers.get("x-api-secret")
      if (secret === null || !pathOf(request).startsWith("/relay/v1/")) return response
      const headers = new Headers(response.headers)
      headers.set("x-credential-fingerprint", hexOf(await sha256(secret)))
      return new Response(await response.text(), { status: response.status, headers })
    }
  },
  {
    name: "a revoked credential keeps working (revocation ignored)",
    requirement: "AUTH-401-1",
    checks: ["auth.credentials.revoked"],
    wrap: (handler) => async (request) => {
      if (request.method === "POST" && /\/__control\/api-users\/[^/]+\/revoke$/.test(pathOf(request))) return new Response("{}", { status: 200, headers: { "content-type": "application/json" } })
      return handler(request)
    }
  },
  {
    name: "a deposit address shown before activation",
    requirement: "ACC-ADDR-1",
    checks: ["acc.active.lifecycle", "acc.approve.pending"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "GET" || !pathOf(request).includes("/relay/v1/accounts") || response.status !== 200) return response
      const fill = (record: unknown): unknown => (isObject(record) && record["address"] === null ? { ...record, address: "pending-deposit-address" } : record)
      return rewrite(response, (body) => (isObject(body) && Array.isArray(body["items"]) ? { ...body, items: body["items"].map(fill) } : fill(body)))
    }
  },
  {
    name: "page=0 and negative pages served as page 1",
    requirement: "PAGE-3",
    checks: ["page.invalid-values"],
    wrap: (handler) => async (request) => {
      const url = new URL(request.url)
      const page = url.searchParams.get("page")
      if (page !== null && /^-?\d+$/.test(page) && Number(page) <= 0) {
        url.searchParams.set("page", "1")
        return askAt(handler, request, url)
      }
      return handler(request)
    }
  },
  {
    name: "a duplicate account answered 400 instead of 409",
    requirement: "ACC-CREATE-3",
    checks: ["acc.create.duplicate"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      return response.status === 409 && request.method === "POST" && pathOf(request).endsWith("/relay/v1/accounts") ? rewrite(response, (body) => body, 400) : response
    }
  },
  {
    name: "malformed ids answered 404 instead of 400",
    requirement: "TXN-GET-1",
    checks: ["txn.get.ids"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      return request.method === "GET" && byIdRead.test(pathOf(request)) && response.status === 400 ? rewrite(response, (body) => body, 404) : response
    }
  },
  {
    name: "the whitelist create response carries providerId",
    requirement: "WL-CREATE-2",
    checks: ["wl.create.response"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "POST" || !pathOf(request).endsWith("/whitelisted-addresses") || response.status >= 300) return response
      return rewrite(response, (body) => (isObject(body) ? { ...body, providerId: "00000000-0000-4000-8000-000000000001" } : body))
    }
  },
  {
    name: "estimatedFee sent as a string",
    requirement: "TXN-FEE-2",
    checks: ["txn.fee.shape"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "POST" || !pathOf(request).endsWith("/calculate-fee") || response.status !== 200) return response
      return rewrite(response, (body) => (isObject(body) ? { ...body, estimatedFee: String(body["estimatedFee"]) } : body))
    }
  },
  {
    name: "fuzzed bodies with unknown fields crash the server (500)",
    requirement: "GEN-5XX-1",
    checks: ["gen.fuzz.no-5xx"],
    wrap: (handler) => async (request) => {
      if (request.method !== "POST" || !pathOf(request).startsWith("/relay/v1/")) return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      if (body === undefined || (isObject(body) && typeof body["name"] !== "string" && "name" in body)) {
        return new Response(JSON.stringify({ message: "internal error", code: "INTERNAL", requestId: "x" }), { status: 500, headers: { "content-type": "application/json" } })
      }
      return handler(copy)
    }
  },
  {
    name: "timestamps not in UTC",
    requirement: "GEN-TIME-1",
    checks: ["acc.create.response"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "POST" || !pathOf(request).endsWith("/relay/v1/accounts") || response.status !== 201) return response
      return rewrite(response, (body) => (isObject(body) && typeof body["createdAt"] === "string" ? { ...body, createdAt: body["createdAt"].replace(/(\.\d+)?Z$/, "+02:00") } : body))
    }
  }
  ,
  {
    name: "the status endpoint also demands the detail permission (a permission-table mistake)",
    requirement: "AUTH-PERM-1",
    checks: ["auth.permission.matrix"],
    wrap: (handler) => async (request) => {
      if (request.method !== "GET" || !/\/relay\/v1\/transactions\/[^/]+\/status$/.test(pathOf(request))) return handler(request)
      const detail = await handler(new Request(request.url.replace(/\/status$/, ""), { headers: request.headers }))
      if (detail.status === 403) return new Response(JSON.stringify({ message: "Missing required API scope: View custody transaction detail" }), { status: 403, headers: { "content-type": "application/json" } })
      return handler(request)
    }
  },
  {
    name: "request headers logged: secrets in the log lines",
    requirement: "AUTH-SEC-1",
    checks: ["auth.secret.not-logged"],
    wrap: (handler) => {
      const logged: Array<string> = []
      return async (request) => {
        const secret = request.headers.get("x-api-secret")
        if (secret !== null && logged.length < 50) logged.push(`${request.method} ${pathOf(request)} x-api-secret=${secret}`)
        const response = await handler(request)
        if (request.method !== "GET" || pathOf(request) !== "/__control/logs" || response.status !== 200) return response
        return rewrite(response, (body) => (isObject(body) && Array.isArray(body["lines"]) ? { ...body, lines: [...body["lines"], ...logged.splice(0)] } : body))
      }
    }
  },
  {
    name: "approve answers the account as active instead of approved",
    requirement: "ACC-APPR-1",
    checks: ["acc.approve.pending"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "POST" || !pathOf(request).endsWith("/accounts/approve") || response.status !== 200) return response
      return rewrite(response, (body) => (isObject(body) ? { ...body, status: "active" } : body))
    }
  },
  {
    name: "a credential that is not client-scoped is served (as if scoped to nothing: empty lists)",
    requirement: "AUTH-SCOPE-1",
    checks: ["auth.scope.unscoped"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (response.status !== 403 || request.method !== "GET" || !isList(request)) return response
      const body = (await response.clone().json()) as unknown
      if (isObject(body) && typeof body["message"] === "string" && body["message"].startsWith("Missing required API scope")) return response
      return new Response(JSON.stringify({ items: [], total: 0, page: 1, limit: 20, totalPages: 0 }), { status: 200, headers: { "content-type": "application/json" } })
    }
  },
  {
    name: "a permission change ignored until restart",
    requirement: "AUTH-PERM-2",
    checks: ["auth.permission.change"],
    wrap: (handler) => async (request) => {
      if (request.method === "PUT" && /\/__control\/api-users\/[^/]+\/permissions$/.test(pathOf(request))) return new Response("{}", { status: 200, headers: { "content-type": "application/json" } })
      return handler(request)
    }
  },
  {
    name: "paths outside the version prefix served",
    requirement: "GEN-PATH-1",
    checks: ["gen.path.prefix"],
    wrap: (handler) => async (request) => {
      const url = new URL(request.url)
      if (/^\/(relay\/v2\/|relay\/|v1\/)?accounts$/.test(url.pathname.slice(1) === "" ? "" : url.pathname) || /^\/(relay\/v2|relay|v1)\/accounts$/.test(url.pathname) || url.pathname === "/accounts") {
        url.pathname = "/relay/v1/accounts"
        return askAt(handler, request, url)
      }
      return handler(request)
    }
  },
  {
    name: "the status filter files PENDING_PROVIDER_APPROVAL under completed, against the profile",
    requirement: "TXN-LIST-2",
    checks: ["txn.approval.quorum"],
    wrap: (handler) => async (request) => {
      const url = new URL(request.url)
      const status = url.searchParams.get("status")?.toLowerCase()
      if (!isTransactionList(request) || (status !== "pending" && status !== "completed")) return handler(request)
      const moved = (item: unknown): boolean => isObject(item) && item["status"] === "PENDING_PROVIDER_APPROVAL"
      const itemsOf = (body: unknown): ReadonlyArray<unknown> => (isObject(body) && Array.isArray(body["items"]) ? body["items"] : [])
      const totalOf = (body: unknown): number => (isObject(body) && typeof body["total"] === "number" ? body["total"] : 0)
      if (status === "pending") {
        return rewrite(await handler(request), (body) => ({ ...(isObject(body) ? body : {}), items: itemsOf(body).filter((item) => !moved(item)), total: totalOf(body) - itemsOf(body).filter(moved).length }))
      }
      const pendingUrl = new URL(url)
      pendingUrl.searchParams.set("status", "pending")
      const extra = itemsOf(await (await askAt(handler, request, pendingUrl)).json()).filter(moved)
      return rewrite(await handler(request), (body) => ({ ...(isObject(body) ? body : {}), items: [...extra, ...itemsOf(body)], total: totalOf(body) + extra.length }))
    }
  },
  {
    name: "a transactions page that has rows reports every client's transactions as its total",
    requirement: "SCOPE-2",
    checks: ["scope.lists"],
    wrap: (handler) => {
      // Every transaction initiated through this handler, whichever client's: what a count missing its client
      // condition would answer.
      let initiated = 0
      return async (request) => {
        const response = await handler(request)
        if (request.method === "POST" && pathOf(request).endsWith("/relay/v1/transactions/initiate") && response.status === 201) initiated += 1
        if (!isTransactionList(request) || response.status !== 200) return response
        return rewrite(response, (body) => (isObject(body) && Array.isArray(body["items"]) && body["items"].length > 0 ? { ...body, total: initiated } : body))
      }
    }
  },
  {
    name: "a filtered transactions total counts every transaction of the client",
    requirement: "TXN-LIST-1",
    checks: ["txn.list.filters"],
    wrap: (handler) => async (request) => {
      const url = new URL(request.url)
      if (!isTransactionList(request) || !url.searchParams.has("status")) return handler(request)
      const unfiltered = new URL(url)
      unfiltered.searchParams.delete("status")
      const all = (await (await askAt(handler, request, unfiltered)).json()) as unknown
      return rewrite(await handler(request), (body) => (isObject(body) && isObject(all) ? { ...body, total: all["total"] } : body))
    }
  },
  {
    name: "the transaction status filter is case-sensitive",
    requirement: "TXN-LIST-1",
    checks: ["txn.list.filters"],
    wrap: (handler) => async (request) => {
      const status = new URL(request.url).searchParams.get("status")
      if (isTransactionList(request) && status !== null && status !== status.toLowerCase()) {
        return new Response(JSON.stringify({ message: "invalid status", code: "INVALID_REQUEST", requestId: "x" }), { status: 400, headers: { "content-type": "application/json" } })
      }
      return handler(request)
    }
  },
  {
    name: "the account role filter ignored",
    requirement: "ACC-LIST-1",
    checks: ["acc.list.filters"],
    wrap: (handler) => async (request) => {
      const url = new URL(request.url)
      if (request.method !== "GET" || url.pathname !== "/relay/v1/accounts" || !url.searchParams.has("role")) return handler(request)
      url.searchParams.delete("role")
      return askAt(handler, request, url)
    }
  },
  {
    name: "an account name of 51 characters accepted (truncated to 50)",
    requirement: "LIM-SIZE-1",
    checks: ["acc.create.validation"],
    wrap: (handler) => async (request) => {
      if (request.method !== "POST" || !pathOf(request).endsWith("/relay/v1/accounts")) return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      if (isObject(body) && typeof body["name"] === "string" && body["name"].length === 51) return handler(withBody(copy, { ...body, name: body["name"].slice(0, 50) }))
      return handler(copy)
    }
  },
  {
    name: "a whitelist description of 501 characters accepted (truncated)",
    requirement: "WL-CREATE-1",
    checks: ["wl.create.validation"],
    wrap: (handler) => async (request) => {
      if (request.method !== "POST" || !pathOf(request).endsWith("/relay/v1/whitelisted-addresses")) return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      if (isObject(body) && typeof body["description"] === "string" && body["description"].length > 500) return handler(withBody(copy, { ...body, description: body["description"].slice(0, 500) }))
      return handler(copy)
    }
  },
  {
    name: "request validation before authentication: a bad body with bad credentials is 400",
    requirement: "AUTH-ORDER-1",
    checks: ["auth.order"],
    wrap: (handler) => async (request) => {
      if (request.method !== "POST" || !pathOf(request).startsWith("/relay/v1/")) return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      if (body === undefined) return new Response(JSON.stringify({ message: "the request body is not valid JSON", code: "MALFORMED_JSON", requestId: "x" }), { status: 400, headers: { "content-type": "application/json" } })
      return handler(copy)
    }
  },
  {
    name: "the status record carries extra fields",
    requirement: "TXN-SHAPE-4",
    checks: ["txn.shape.records"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "GET" || !pathOf(request).endsWith("/status") || response.status !== 200) return response
      return rewrite(response, (body) => (isObject(body) ? { ...body, amount: "1" } : body))
    }
  },
  {
    name: "approvals lack providerApprovedAt",
    requirement: "TXN-SHAPE-3",
    checks: ["txn.shape.records"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "GET" || !/\/relay\/v1\/transactions\/[^/]+$/.test(pathOf(request)) || response.status !== 200) return response
      return rewrite(response, (body) => {
        if (!isObject(body) || !isObject(body["approvals"])) return body
        const { providerApprovedAt: _dropped, ...approvals } = body["approvals"]
        return { ...body, approvals }
      })
    }
  },
  {
    name: "the transactions list ignores page: every page is the first, the page asked for echoed",
    requirement: "PAGE-2",
    checks: ["page.walk"],
    wrap: (handler) => async (request) => {
      const url = new URL(request.url)
      const page = url.searchParams.get("page")
      if (!isTransactionList(request) || page === null || page === "1") return handler(request)
      url.searchParams.set("page", "1")
      const response = await askAt(handler, request, url)
      return rewrite(response, (body) => (isObject(body) ? { ...body, page: Number(page) } : body))
    }
  },
  {
    name: "totalPages off by one",
    requirement: "PAGE-4",
    checks: ["page.walk"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (!isList(request) || response.status !== 200) return response
      return rewrite(response, (body) => (isObject(body) && typeof body["totalPages"] === "number" ? { ...body, totalPages: body["totalPages"] + 1 } : body))
    }
  },
  {
    name: "the default page size is 10, not 20",
    requirement: "PAGE-2",
    checks: ["page.envelope"],
    wrap: (handler) => async (request) => {
      const url = new URL(request.url)
      if (!isList(request) || url.searchParams.has("limit")) return handler(request)
      url.searchParams.set("limit", "10")
      return askAt(handler, request, url)
    }
  },
  {
    name: "the account create response carries the full record",
    requirement: "ACC-SHAPE-2",
    checks: ["acc.create.response"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "POST" || !pathOf(request).endsWith("/relay/v1/accounts") || response.status !== 201) return response
      return rewrite(response, (body) => (isObject(body) ? { ...body, availableBalance: "0", updatedAt: body["createdAt"] } : body))
    }
  },
  {
    name: "account records lack chainType",
    requirement: "ACC-SHAPE-1",
    checks: ["acc.create.response"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "GET" || !/\/relay\/v1\/accounts\/[^/]+$/.test(pathOf(request)) || response.status !== 200) return response
      return rewrite(response, (body) => {
        if (!isObject(body)) return body
        const { chainType: _dropped, ...rest } = body
        return rest
      })
    }
  },
  {
    name: "an assetType differing from the source's asset is corrected instead of refused",
    requirement: "TXN-VAL-2",
    checks: ["txn.validation.asset-mismatch"],
    wrap: (handler) => async (request) => {
      if (!isTransfer(request)) return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      if (!isObject(body) || typeof body["sourceAccountId"] !== "string") return handler(copy)
      const read = await handler(new Request(new URL(`/relay/v1/accounts/${body["sourceAccountId"]}`, copy.url), { headers: copy.headers }))
      const account = read.status === 200 ? ((await read.json()) as unknown) : undefined
      return handler(isObject(account) ? withBody(copy, { ...body, assetType: account["assetId"] }) : copy)
    }
  },
  {
    name: "a pending account usable as an internal destination",
    requirement: "TXN-DEST-2",
    checks: ["txn.destination.internal"],
    wrap: (handler, { token }) => async (request) => {
      if (!isTransfer(request)) return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      if (isObject(body) && body["destinationType"] === "internal" && typeof body["destinationId"] === "string") {
        const id = body["destinationId"]
        await handler(new Request(new URL("/relay/v1/accounts/approve", copy.url), { method: "POST", headers: copy.headers, body: JSON.stringify({ accountId: id }) }))
        await control(handler, token, "POST", `/accounts/${id}/activate`)
      }
      return handler(copy)
    }
  },
  {
    name: "a foreign source answered 404 by calculate-fee instead of 403",
    requirement: "TXN-VAL-3",
    checks: ["txn.validation.source"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      return request.method === "POST" && pathOf(request).endsWith("/calculate-fee") && response.status === 403 ? rewrite(response, (body) => body, 404) : response
    }
  },
  {
    name: "a custody provider fault answered 502",
    requirement: "TXN-FEE-3",
    checks: ["txn.fee.provider"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      return response.status === 500 && pathOf(request).endsWith("/calculate-fee") ? rewrite(response, (body) => body, 502) : response
    }
  },
  {
    name: "error bodies of 404s lack the code field the others carry",
    requirement: "ERR-BODY-1",
    checks: ["err.body.consistent"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (response.status !== 404) return response
      return rewrite(response, (body) => (isObject(body) ? { message: body["message"] } : body))
    }
  },
  {
    name: "a transaction list filtered by a foreign account shows its transactions",
    requirement: "SCOPE-3",
    checks: ["scope.transactions.foreign-account-filter"],
    wrap: (handler, { token }) => {
      const owners = new Map<string, string>()
      return async (request) => {
        const url = new URL(request.url)
        const key = request.headers.get("x-api-key") ?? ""
        if (request.method === "POST" && url.pathname === "/relay/v1/transactions/initiate") owners.set(key, request.headers.get("x-api-secret") ?? "")
        const accountId = url.searchParams.get("accountId")
        if (request.method !== "GET" || url.pathname !== "/relay/v1/transactions" || accountId === null) return handler(request)
        const response = await handler(request)
        const body = (await response.clone().json()) as unknown
        if (!isObject(body) || body["total"] !== 0) return response
        // Leak: answer with another caller's view of the same filter.
        for (const [otherKey, secret] of owners) {
          if (otherKey === key) continue
          const leaked = await handler(new Request(url, { headers: { "x-api-key": otherKey, "x-api-secret": secret } }))
          const leakedBody = (await leaked.json()) as unknown
          if (isObject(leakedBody) && typeof leakedBody["total"] === "number" && leakedBody["total"] > 0) return new Response(JSON.stringify(leakedBody), { status: 200, headers: { "content-type": "application/json" } })
        }
        void token
        return response
      }
    }
  },
  {
    name: "initiate answers the status in upper case",
    requirement: "TXN-INIT-1",
    checks: ["txn.initiate.response"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "POST" || !pathOf(request).endsWith("/transactions/initiate") || response.status !== 201) return response
      return rewrite(response, (body) => (isObject(body) && typeof body["status"] === "string" ? { ...body, status: body["status"].toUpperCase() } : body))
    }
  },
  {
    name: "the whitelist status filter takes one value only",
    requirement: "WL-LIST-1",
    checks: ["wl.list.filters"],
    wrap: (handler) => async (request) => {
      const url = new URL(request.url)
      if (request.method !== "GET" || url.pathname !== "/relay/v1/whitelisted-addresses") return handler(request)
      const statuses = url.searchParams.getAll("status").flatMap((value) => value.split(","))
      if (statuses.length <= 1) return handler(request)
      url.searchParams.delete("status")
      url.searchParams.set("status", statuses[0] ?? "")
      return askAt(handler, request, url)
    }
  },
  {
    name: "one key's burst spends another key's budget (the limit is not per API key)",
    requirement: "LIM-RATE-1",
    checks: ["limit.rate.burst"],
    wrap: (handler) => {
      let limitedUntil = 0
      return async (request) => {
        if (!pathOf(request).startsWith("/relay/v1/")) return handler(request)
        if (Date.now() < limitedUntil) {
          const reset = String(Math.ceil(limitedUntil / 1000))
          return new Response(JSON.stringify({ message: "rate limited", code: "RATE_LIMITED", requestId: "x" }), { status: 429, headers: { "content-type": "application/json", "retry-after": "1", "x-ratelimit-limit": "5", "x-ratelimit-remaining": "0", "x-ratelimit-reset": reset } })
        }
        const response = await handler(request)
        if (response.status === 429) limitedUntil = Date.now() + 1000
        return response
      }
    }
  },
  {
    name: "JSON answers labelled text/plain",
    requirement: "GEN-JSON-1",
    checks: ["gen.json.malformed-body"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (!pathOf(request).startsWith("/relay/v1/") || response.status !== 200) return response
      const headers = new Headers(response.headers)
      headers.set("content-type", "text/plain")
      return new Response(await response.text(), { status: response.status, headers })
    }
  },
  {
    name: "availableBalance as a JSON number",
    requirement: "GEN-DEC-1",
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "GET" || !/\/relay\/v1\/accounts(\/[^/]+)?$/.test(pathOf(request)) || response.status !== 200) return response
      const numeric = (record: unknown) => (isObject(record) && typeof record["availableBalance"] === "string" ? { ...record, availableBalance: Number(record["availableBalance"]) } : record)
      return rewrite(response, (body) => (isObject(body) && Array.isArray(body["items"]) ? { ...body, items: body["items"].map(numeric) } : numeric(body)))
    }
  },
  {
    name: "a bearer token with the secret authenticates without the header pair",
    requirement: "AUTH-HDR-1",
    checks: ["auth.headers.required"],
    wrap: (handler) => {
      const keyOfSecret = new Map<string, string>()
      return async (request) => {
        const bearer = /^Bearer (.+)$/.exec(request.headers.get("authorization") ?? "")?.[1]
        const key = bearer === undefined ? undefined : keyOfSecret.get(bearer)
        if (bearer !== undefined && key !== undefined && request.headers.get("x-api-key") === null) {
          const headers = new Headers(request.headers)
          headers.set("x-api-key", key)
          headers.set("x-api-secret", bearer)
          return handler(new Request(request.url, { method: request.method, headers }))
        }
        const response = await handler(request)
        if (request.method === "POST" && pathOf(request) === "/__control/api-users" && response.status === 201) {
          const body = (await response.clone().json()) as unknown
          if (isObject(body)) keyOfSecret.set(String(body["secret"]), String(body["keyId"]))
        }
        return response
      }
    }
  },
  {
    name: "the key id sent as its own secret authenticates",
    requirement: "AUTH-KEY-1",
    checks: ["auth.key.prefix"],
    wrap: (handler) => {
      const secretOfKey = new Map<string, string>()
      return async (request) => {
        const key = request.headers.get("x-api-key")
        const secret = key === null ? undefined : secretOfKey.get(key)
        if (key !== null && secret !== undefined && request.headers.get("x-api-secret") === key) {
          const headers = new Headers(request.headers)
          headers.set("x-api-secret", secret)
          return handler(new Request(request.url, { method: request.method, headers }))
        }
        const response = await handler(request)
        if (request.method === "POST" && pathOf(request) === "/__control/api-users" && response.status === 201) {
          const body = (await response.clone().json()) as unknown
          if (isObject(body)) secretOfKey.set(String(body["keyId"]), String(body["secret"]))
        }
        return response
      }
    }
  },
  {
    name: "list envelopes without totalPages",
    requirement: "PAGE-1",
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (!isList(request) || response.status !== 200) return response
      return rewrite(response, (body) => (isObject(body) ? Object.fromEntries(Object.entries(body).filter(([key]) => key !== "totalPages")) : body))
    }
  },
  {
    name: "account creation answers 200",
    requirement: "ACC-CREATE-1",
    checks: ["acc.create.response"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "POST" || pathOf(request) !== "/relay/v1/accounts" || response.status !== 201) return response
      return rewrite(response, (body) => body, 200)
    }
  },
  {
    name: "an unknown workspace is taken as custody",
    requirement: "ACC-CREATE-2",
    checks: ["acc.create.validation"],
    wrap: (handler) => async (request) => {
      if (request.method !== "POST" || pathOf(request) !== "/relay/v1/accounts") return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      if (!isObject(body) || typeof body["workspace"] !== "string" || ["custody", "transactional"].includes(body["workspace"])) return handler(copy)
      return handler(withBody(copy, { ...body, workspace: "custody" }))
    }
  },
  {
    name: "approving another client's account answers 403",
    requirement: "ACC-APPR-3",
    checks: ["acc.approve.foreign-or-unknown"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "POST" || !/\/relay\/v1\/accounts\/(approve|reject)$/.test(pathOf(request)) || response.status !== 404) return response
      return rewrite(response, () => ({ message: "Forbidden" }), 403)
    }
  },
  {
    name: "a malformed account id answered 404",
    requirement: "ACC-GET-1",
    checks: ["acc.get.ids"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "GET" || !/\/relay\/v1\/accounts\/[^/]+$/.test(pathOf(request)) || response.status !== 400) return response
      return rewrite(response, (body) => body, 404)
    }
  },
  {
    name: "the transaction detail lacks providerTransactionId",
    requirement: "TXN-SHAPE-2",
    checks: ["txn.shape.records"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "GET" || !/\/relay\/v1\/transactions\/[^/]+$/.test(pathOf(request)) || response.status !== 200) return response
      return rewrite(response, (body) => (isObject(body) ? Object.fromEntries(Object.entries(body).filter(([key]) => key !== "providerTransactionId")) : body))
    }
  },
  {
    name: "initiate under a policy that requires approval answers a status past it",
    requirement: "TXN-INIT-2",
    checks: ["txn.approval.policy"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "POST" || !pathOf(request).endsWith("/transactions/initiate") || response.status !== 201) return response
      return rewrite(response, (body) => (isObject(body) && body["status"] === "awaiting_signature" ? { ...body, status: "pending_provider_approval" } : body))
    }
  },
  {
    name: "a missing destinationType is taken as internal",
    requirement: "TXN-VAL-1",
    checks: ["txn.validation.fields"],
    wrap: (handler) => async (request) => {
      if (!isTransfer(request)) return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      if (!isObject(body) || "destinationType" in body) return handler(copy)
      return handler(withBody(copy, { ...body, destinationType: "internal" }))
    }
  },
  {
    name: "whitelisted address records without providerId",
    requirement: "WL-SHAPE-1",
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "GET" || !/\/relay\/v1\/whitelisted-addresses(\/[^/]+)?$/.test(pathOf(request)) || response.status !== 200) return response
      const strip = (record: unknown) => (isObject(record) ? Object.fromEntries(Object.entries(record).filter(([key]) => key !== "providerId")) : record)
      return rewrite(response, (body) => (isObject(body) && Array.isArray(body["items"]) ? { ...body, items: body["items"].map(strip) } : strip(body)))
    }
  },
  {
    name: "a malformed whitelisted address id answered 404",
    requirement: "WL-GET-1",
    checks: ["wl.get.ids"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "GET" || !/\/relay\/v1\/whitelisted-addresses\/[^/]+$/.test(pathOf(request)) || response.status !== 400) return response
      return rewrite(response, (body) => body, 404)
    }
  },
  {
    name: "a PENDING whitelisted address reads AWAITING_REVIEW, a status the interface does not have",
    requirement: "WL-STATE-1",
    checks: ["wl.state.flow"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (request.method !== "GET" || !/\/relay\/v1\/whitelisted-addresses\/[^/]+$/.test(pathOf(request)) || response.status !== 200) return response
      return rewrite(response, (body) => (isObject(body) && body["status"] === "PENDING" ? { ...body, status: "AWAITING_REVIEW" } : body))
    }
  },
  {
    name: "invalid requests answered 422 instead of 400",
    requirement: "ERR-CODE-1",
    checks: ["gen.json.malformed-body"],
    wrap: (handler) => async (request) => {
      const response = await handler(request)
      if (!pathOf(request).startsWith("/relay/v1/") || response.status !== 400) return response
      return rewrite(response, (body) => body, 422)
    }
  },
  {
    name: "amounts with a plus sign or padding are trimmed and accepted",
    requirement: "TXN-PREC-1",
    checks: ["txn.amount.malformed"],
    wrap: (handler) => async (request) => {
      if (!isTransfer(request)) return handler(request)
      const { request: copy, body } = await readJsonBody(request)
      if (!isObject(body) || typeof body["amount"] !== "string" || !/^\s*\+?\d+(\.\d+)?\s*$/.test(body["amount"])) return handler(copy)
      return handler(withBody(copy, { ...body, amount: body["amount"].trim().replace(/^\+/, "") }))
    }
  },
  {
    name: "a limited key stays limited after its window",
    requirement: "LIM-RATE-1",
    checks: ["limit.rate.window"],
    wrap: (handler) => {
      const limited = new Map<string, { text: string; headers: Headers }>()
      return async (request) => {
        const key = request.headers.get("x-api-key") ?? ""
        const stuck = limited.get(key)
        if (pathOf(request).startsWith("/relay/v1/") && stuck !== undefined) return new Response(stuck.text, { status: 429, headers: stuck.headers })
        const response = await handler(request)
        if (response.status === 429) limited.set(key, { text: await response.clone().text(), headers: new Headers(response.headers) })
        return response
      }
    }
  },
  ...fakeFaults
]
