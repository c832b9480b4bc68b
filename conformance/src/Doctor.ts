/**
 * `doctor`: before any check runs, asks the target and its control whether they answer as the protocol says,
 * validates the shapes of their answers, and lists what is missing. Probes of optional calls use unknown ids, so
 * they change nothing (a supported call answers 404, a missing one 501). It also checks the profile against what
 * the fixtures need (an asset whose fees can be estimated, sample addresses the target accepts and refuses as the
 * profile says) and measures round trips, warning when the target is slow to answer small requests.
 */
import { capabilityNames, CapabilityMissing, ControlError, type Capability, type Control } from "./Control.js"
import { allPermissions } from "./Endpoints.js"
import { declaredCapabilities, fillTemplate, parseProfile, type Profile } from "./Profile.js"
import { RelayClient } from "./RelayClient.js"
import { array, integer, object } from "./Shape.js"
import type { Transport } from "./Transport.js"

export interface DoctorResult {
  readonly ok: boolean
  /** Median round trip of a small read and a small write, in milliseconds (when provisioning succeeded). */
  readonly latency?: { readonly readMs: number; readonly writeMs: number }
  readonly profile: Profile | undefined
  readonly problems: ReadonlyArray<string>
  readonly notes: ReadonlyArray<string>
  readonly capabilities: Readonly<Partial<Record<Capability, "declared" | "probed" | "missing" | "unknown">>>
}

const unknownId = "00000000-0000-4000-8000-00000000d0c7"

/** Roughly how many requests a default run makes, to turn a round trip into the run time it costs. */
const requestsPerRun = 3000
/** Above this median a run slows down noticeably; a server delaying small writes (Nagle, no TCP_NODELAY) shows ~40 ms. */
const slowRoundTripMs = 15

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? 0
}

/** What the fixtures need of the profile, checked against the target with a fresh API user. */
const fixtureProblems = async (profile: Profile, relay: RelayClient): Promise<Array<string>> => {
  const problems: Array<string> = []
  if (!profile.assets.some((asset) => asset.feeEstimation)) problems.push("profile: no asset has fee estimation; the checks that price or initiate a transfer need one")
  for (const asset of profile.assets) {
    for (const address of asset.sampleAddresses.valid) {
      const result = await relay.createWhitelist({ name: `doctor ${asset.assetId}`, address, assetType: asset.assetId })
      if (result.status !== 200 && result.status !== 201) problems.push(`profile asset ${asset.assetId}: the valid sample address ${address} was refused (${result.status}); fixtures whitelist it`)
    }
    for (const address of asset.sampleAddresses.invalid) {
      const result = await relay.createWhitelist({ name: `doctor ${asset.assetId}`, address, assetType: asset.assetId })
      if (result.status !== 400) problems.push(`profile asset ${asset.assetId}: the invalid sample address ${address} answered ${result.status}, not 400`)
    }
  }
  const approvals = profile.approvals
  for (const [name, template] of [["approve", approvals?.approve], ["reject", approvals?.reject]] as const) {
    if (template === undefined) continue
    // A real endpoint asks for credentials first (401); a template that names no endpoint is typically a 404.
    const call = fillTemplate(template, unknownId)
    const anonymous = await relay.withCredential(undefined).raw(call.method, call.path, call.body)
    const result = await relay.raw(call.method, call.path, call.body)
    if (anonymous.status !== 401) problems.push(`profile approvals.${name}: ${call.method} ${call.path} without credentials answered ${anonymous.status}, not 401: is it an endpoint of the target?`)
    else if (result.status !== 404 && result.status !== 400) problems.push(`profile approvals.${name}: ${call.method} ${call.path} for an unknown transaction answered ${result.status}, not 404`)
  }
  return problems
}

const measureLatency = async (relay: RelayClient): Promise<{ readMs: number; writeMs: number }> => {
  const timed = async (call: () => Promise<unknown>): Promise<number> => {
    const started = performance.now()
    await call()
    return performance.now() - started
  }
  const reads: Array<number> = []
  const writes: Array<number> = []
  for (let index = 0; index < 9; index += 1) reads.push(await timed(() => relay.listAccounts()))
  for (let index = 0; index < 5; index += 1) writes.push(await timed(() => relay.createAccount({ name: `doctor latency ${index}`, workspace: "custody", assetId: "no-such-asset" })))
  return { readMs: median(reads), writeMs: median(writes) }
}

const probes: ReadonlyArray<{ readonly capability: Capability; readonly probe: (control: Control) => Promise<unknown> }> = [
  { capability: "api-users.revoke", probe: (control) => control.revokeApiUser(unknownId) },
  { capability: "api-users.permissions", probe: (control) => control.setPermissions(unknownId, []) },
  { capability: "accounts.activate", probe: (control) => control.activateAccount(unknownId) },
  { capability: "accounts.credit", probe: (control) => control.creditAccount(unknownId, "1") },
  { capability: "whitelisted-addresses.status", probe: (control) => control.setWhitelistStatus(unknownId, "APPROVED") },
  { capability: "transactions.advance", probe: (control) => control.advanceTransaction(unknownId, "completed") },
  { capability: "provider-fault", probe: (control) => control.setProviderFault(unknownId, "none") },
  { capability: "logs", probe: (control) => control.logs() },
  { capability: "transactions.decide", probe: (control) => control.decideTransaction(unknownId, unknownId, "approve") }
]

export const runDoctor = async (
  transport: Transport,
  control: Control | undefined,
  blackBoxProfile: unknown,
  controlTokenCheck?: () => Promise<number>
): Promise<DoctorResult> => {
  const problems: Array<string> = []
  const notes: Array<string> = []
  const capabilities: Partial<Record<Capability, "declared" | "probed" | "missing" | "unknown">> = {}
  let rawProfile: unknown = blackBoxProfile
  if (control !== undefined) {
    try {
      rawProfile = await control.profile()
    } catch (error) {
      problems.push(`GET /profile failed: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  const parsed = rawProfile === undefined ? undefined : parseProfile(rawProfile)
  let profile: Profile | undefined
  if (parsed === undefined) problems.push("no profile: give a control or a profile in the black-box config")
  else if (!parsed.ok) problems.push(...parsed.problems.map((problem) => `profile: ${problem}`))
  else {
    profile = parsed.profile
    notes.push(...parsed.warnings)
    notes.push(`implementation ${profile.name} ${profile.version}, interface ${profile.interfaceVersion}`)
    if (profile.interfaceVersion !== "v1") problems.push(`profile interfaceVersion is ${profile.interfaceVersion}; this kit tests v1`)
  }
  if (control === undefined) {
    notes.push("black-box mode: no control; checks that need fixtures are not applicable")
    return { ok: problems.length === 0 && profile !== undefined, profile, problems, notes, capabilities }
  }
  if (controlTokenCheck !== undefined) {
    const status = await controlTokenCheck()
    if (status !== 401) problems.push(`a control call with a wrong token answered ${status}, the protocol says 401`)
  }
  let latency: { readMs: number; writeMs: number } | undefined
  try {
    const { clientId } = await control.createClient()
    const user = await control.createApiUser(clientId, allPermissions)
    const relay = new RelayClient(transport, { keyId: user.keyId, secret: user.secret })
    const list = await relay.listAccounts()
    const shape = object({ items: array(() => []), total: integer, page: integer, limit: integer, totalPages: integer })(list.json, "GET /relay/v1/accounts")
    if (list.status !== 200) problems.push(`a fresh API user listing accounts got ${list.status}, expected 200`)
    else problems.push(...shape)
    if (profile !== undefined && list.status === 200) problems.push(...(await fixtureProblems(profile, relay)))
    latency = await measureLatency(relay)
    const slowest = Math.max(latency.readMs, latency.writeMs)
    notes.push(`round trips: median ${latency.readMs.toFixed(1)} ms for a read, ${latency.writeMs.toFixed(1)} ms for a small write`)
    if (slowest > slowRoundTripMs) {
      notes.push(
        `warning: slow round trips (${slowest.toFixed(0)} ms): a run makes about ${requestsPerRun} requests, so expect about ${Math.round((slowest * requestsPerRun) / 1000)} s of waiting alone; ` +
          "a server that delays small writes (Nagle's algorithm without TCP_NODELAY shows about 40 ms) turns a 15 s run into minutes"
      )
    }
  } catch (error) {
    problems.push(`provisioning a client and API user failed: ${error instanceof Error ? error.message : String(error)}`)
  }
  const declared = profile === undefined ? undefined : declaredCapabilities(profile)
  // Decisions through the control are only needed by an implementation without approval endpoints.
  const needed = probes.filter(({ capability }) => capability !== "transactions.decide" || profile?.approvals?.approve === undefined)
  for (const { capability, probe } of needed) {
    try {
      await probe(control)
      capabilities[capability] = "probed"
    } catch (error) {
      if (error instanceof CapabilityMissing) capabilities[capability] = "missing"
      else if (error instanceof ControlError && (error.status === 404 || error.status === 400 || error.status === 409)) capabilities[capability] = "probed"
      else {
        capabilities[capability] = "unknown"
        problems.push(`probe of ${capability}: ${error instanceof Error ? error.message : String(error)}`)
      }
    }
    if (declared !== undefined && declared.has(capability) && capabilities[capability] === "missing") problems.push(`${capability} is declared in the profile but answers 501`)
    if (declared !== undefined && !declared.has(capability) && capabilities[capability] === "probed") notes.push(`${capability} answers but is not declared in the profile's capabilities`)
  }
  if (declared !== undefined) capabilities["rate-limit"] = declared.has("rate-limit") ? "declared" : "missing"
  else capabilities["rate-limit"] = "unknown"
  const missing = capabilityNames.filter((name) => capabilities[name] === "missing")
  if (missing.length > 0) notes.push(`missing optional control calls: ${missing.join(", ")}; checks needing them are not applicable`)
  return { ok: problems.length === 0 && profile !== undefined, profile, problems, notes, capabilities, ...(latency === undefined ? {} : { latency }) }
}
