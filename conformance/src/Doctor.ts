/**
 * `doctor`: before any check runs, asks the target and its control whether they answer as the protocol says,
 * validates the shapes of their answers, and lists what is missing. Probes of optional calls use unknown ids, so
 * they change nothing (a supported call answers 404, a missing one 501).
 */
import { capabilityNames, CapabilityMissing, ControlError, type Capability, type Control } from "./Control.js"
import { allPermissions } from "./Endpoints.js"
import { declaredCapabilities, parseProfile, type Profile } from "./Profile.js"
import { RelayClient } from "./RelayClient.js"
import { array, integer, object } from "./Shape.js"
import type { Transport } from "./Transport.js"

export interface DoctorResult {
  readonly ok: boolean
  readonly profile: Profile | undefined
  readonly problems: ReadonlyArray<string>
  readonly notes: ReadonlyArray<string>
  readonly capabilities: Readonly<Partial<Record<Capability, "declared" | "probed" | "missing" | "unknown">>>
}

const unknownId = "00000000-0000-4000-8000-00000000d0c7"

const probes: ReadonlyArray<{ readonly capability: Capability; readonly probe: (control: Control) => Promise<unknown> }> = [
  { capability: "api-users.revoke", probe: (control) => control.revokeApiUser(unknownId) },
  { capability: "api-users.permissions", probe: (control) => control.setPermissions(unknownId, []) },
  { capability: "accounts.activate", probe: (control) => control.activateAccount(unknownId) },
  { capability: "accounts.credit", probe: (control) => control.creditAccount(unknownId, "1") },
  { capability: "whitelisted-addresses.status", probe: (control) => control.setWhitelistStatus(unknownId, "APPROVED") },
  { capability: "transactions.advance", probe: (control) => control.advanceTransaction(unknownId, "completed") },
  { capability: "provider-fault", probe: (control) => control.setProviderFault(unknownId, "none") },
  { capability: "logs", probe: (control) => control.logs() }
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
  try {
    const { clientId } = await control.createClient()
    const user = await control.createApiUser(clientId, allPermissions)
    const relay = new RelayClient(transport, { keyId: user.keyId, secret: user.secret })
    const list = await relay.listAccounts()
    const shape = object({ items: array(() => []), total: integer, page: integer, limit: integer, totalPages: integer })(list.json, "GET /relay/v1/accounts")
    if (list.status !== 200) problems.push(`a fresh API user listing accounts got ${list.status}, expected 200`)
    else problems.push(...shape)
  } catch (error) {
    problems.push(`provisioning a client and API user failed: ${error instanceof Error ? error.message : String(error)}`)
  }
  const declared = profile === undefined ? undefined : declaredCapabilities(profile)
  for (const { capability, probe } of probes) {
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
  return { ok: problems.length === 0 && profile !== undefined, profile, problems, notes, capabilities }
}
