/**
 * `runConformance`: provisions nothing globally, runs the selected checks one after another (each on fresh
 * tenants), classifies every outcome, applies the implementation's expected failures, and returns the
 * conformance statement. Usable from any test runner.
 */
import { CheckContext, CheckFailure, NotDeclared, type Check } from "./Check.js"
import { allChecks } from "./checks/index.js"
import { CapabilityMissing, ControlError, controlProtocolVersion, gateControl, HttpControl, recordSecrets, type Control } from "./Control.js"
import { runDoctor, type DoctorResult } from "./Doctor.js"
import type { ExpectedFailure } from "./Expectations.js"
import { FixtureFailure, fixturesFor, type BlackBoxCredentials } from "./Fixtures.js"
import type { Outcome } from "./Outcome.js"
import { declaredCapabilities, type Profile } from "./Profile.js"
import { applyExpectation, countOutcomes, runStatus, summarizeRequirements, unusedExpectations, type CheckReport, type Report } from "./Report.js"
import { Transport, type Target } from "./Transport.js"
import { interfaceVersion, kitName, kitVersion } from "./version.js"

export interface HttpControlOptions {
  /** Absolute control base URL, or a path on the target (default `/__control`). */
  readonly url?: string
  readonly token: string
}

export interface ProgressEvent {
  readonly index: number
  readonly total: number
  readonly checkId: string
  /** Undefined when the check starts. */
  readonly outcome?: Outcome
  readonly durationMs?: number
}

export interface RunOptions {
  readonly target: Target
  /** An in-process control object, or the HTTP control protocol. Absent: black-box mode. */
  readonly control?: Control | HttpControlOptions
  /** Black-box mode: pre-made credentials and the implementation's profile. */
  readonly blackBox?: { readonly credentials: BlackBoxCredentials; readonly profile: unknown }
  readonly checks?: ReadonlyArray<string>
  readonly tags?: ReadonlyArray<string>
  readonly seed?: number
  readonly numRuns?: number
  /** fast-check replay path; meaningful with a single `--check`. */
  readonly path?: string
  /** fast-check replayPath of a model-based run's command sequence (printed in its counterexample). */
  readonly replayPath?: string
  readonly expectedFailures?: ReadonlyArray<ExpectedFailure>
  readonly onProgress?: (event: ProgressEvent) => void
  /** Called with the doctor's findings before any check runs. */
  readonly onDoctor?: (result: DoctorResult) => void
  /** The check list; the kit's own by default. */
  readonly catalogue?: ReadonlyArray<Check>
  /** Wall-clock budget of one check (default 120 s): a hanging target turns it into a harness error. */
  readonly checkTimeoutMs?: number
}

export const defaultNumRuns = 100

/** A stable 31-bit seed per check, so `--seed S --check ID` replays exactly what the full run did. */
export const checkSeed = (runSeed: number, checkId: string): number => {
  let hash = 0x811c9dc5 ^ runSeed
  for (const char of `${runSeed}:${checkId}`) {
    hash ^= char.codePointAt(0) ?? 0
    hash = Math.imul(hash, 0x01000193)
  }
  return (hash >>> 0) & 0x7fffffff
}

class CheckTimeout extends Error {
  constructor(readonly ms: number) {
    super(`the check did not finish within ${ms} ms (is the target hanging?)`)
    this.name = "CheckTimeout"
  }
}

const isControl = (value: Control | HttpControlOptions): value is Control => "createClient" in value

export const selectChecks = (catalogue: ReadonlyArray<Check>, ids: ReadonlyArray<string> | undefined, tags: ReadonlyArray<string> | undefined): Array<Check> => {
  const unknown = (ids ?? []).filter((id) => !catalogue.some((check) => check.id === id))
  if (unknown.length > 0) throw new Error(`unknown check id(s): ${unknown.join(", ")} (ids are matched exactly)`)
  return catalogue.filter((check) => {
    if (ids !== undefined && ids.length > 0 && !ids.includes(check.id)) return false
    if (tags !== undefined && tags.length > 0 && !check.tags.some((tag) => tags.includes(tag))) return false
    return true
  })
}

export const makeControl = (target: Target, options: Control | HttpControlOptions | undefined): Control | undefined => {
  if (options === undefined) return undefined
  if (isControl(options)) return options
  const url = options.url ?? "/__control"
  if (/^https?:\/\//.test(url)) {
    const parsed = new URL(url)
    return new HttpControl(new Transport({ baseUrl: parsed.origin }), parsed.pathname, options.token)
  }
  return new HttpControl(new Transport(target), url, options.token)
}

const replayArgs = (checkId: string, seed: number, path: string | undefined, replayPath?: string): string =>
  `--check ${checkId} --seed ${seed}` + (path === undefined ? "" : ` --path ${path}`) + (replayPath === undefined ? "" : ` --replay-path ${replayPath}`)

/** The command-sequence replayPath fast-check prints inside a model-based counterexample. */
export const replayPathOf = (counterexample: string): string | undefined => /replayPath="([^"]+)"/.exec(counterexample)?.[1]

const runOne = async (
  check: Check,
  profile: Profile,
  control: Control | undefined,
  blackBox: BlackBoxCredentials | undefined,
  transport: Transport,
  runSecrets: ReadonlySet<string>,
  settings: { runSeed: number; numRuns: number; path: string | undefined; replayPath: string | undefined; timeoutMs: number }
): Promise<Omit<CheckReport, "outcome" | "expectation">> => {
  const seed = checkSeed(settings.runSeed, check.id)
  const started = performance.now()
  const base = { id: check.id, title: check.title, requirements: check.requirements, tags: check.tags, seed, replay: replayArgs(check.id, settings.runSeed, settings.path) }
  const done = (rawOutcome: Outcome, extra: Partial<CheckReport> = {}): Omit<CheckReport, "outcome" | "expectation"> => ({
    ...base,
    rawOutcome,
    durationMs: Math.round(performance.now() - started),
    violations: [],
    warnings: [],
    ...extra
  })
  if (control === undefined && check.needs.length > 0) return done("not-applicable", { message: `needs ${check.needs.join(", ")}; black-box mode has no control` })
  if (control === undefined && (check.blackBoxCredentials ?? []).some((name) => name === "secondary" && blackBox?.secondary === undefined)) {
    return done("not-applicable", { message: "needs a secondary credential in the black-box config" })
  }
  const declared = declaredCapabilities(profile)
  const lacking = check.needs.filter((need) => need !== "control" && declared !== undefined && !declared.has(need))
  if (control !== undefined && lacking.length > 0) return done("not-applicable", { message: `the profile does not declare ${lacking.join(", ")}` })
  const context = new CheckContext(check, profile, { seed, numRuns: settings.numRuns, path: settings.path, replayPath: settings.replayPath }, control, fixturesFor(blackBox), transport, runSecrets)
  let harness: string | undefined
  let missing: string | undefined
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CheckTimeout(settings.timeoutMs)), settings.timeoutMs)
  })
  try {
    await Promise.race([check.run(context), timeout])
  } catch (error) {
    if (error instanceof CheckFailure) context.violations.push(error.violation)
    else if (error instanceof CapabilityMissing || error instanceof NotDeclared) missing = error.message
    else if (error instanceof ControlError) harness = `control call failed: ${error.message}`
    else if (error instanceof FixtureFailure) harness = [error.message, ...error.exchanges].join("\n")
    else if (error instanceof CheckTimeout) harness = error.message
    else harness = error instanceof Error ? (error.stack ?? error.message) : String(error)
  } finally {
    clearTimeout(timer)
  }
  const { refused, answered } = context.refusalRatio
  if (check.expectsWork === true && answered >= 10 && refused / answered > 0.5) {
    context.warn(`vacuous run: ${refused} of ${answered} answers were 403 or 404 where the check expected work`)
  }
  const failure = context.propertyFailure
  const extra: Partial<CheckReport> = { violations: context.violations, warnings: context.warnings }
  const withReplay = failure === undefined ? extra : { ...extra, path: failure.path ?? "", counterexample: failure.counterexample, replay: replayArgs(check.id, settings.runSeed, failure.path, replayPathOf(failure.counterexample)) }
  if (missing !== undefined) return done("not-applicable", { ...withReplay, message: missing })
  if (harness !== undefined) return done("harness-error", { ...withReplay, message: harness })
  if (context.violations.some((violation) => CheckContext.isHard(violation))) return done("fail", withReplay)
  if (context.violations.length > 0 || context.warnings.length > 0) return done("warn", withReplay)
  return done("pass", withReplay)
}

export const runConformance = async (options: RunOptions): Promise<Report> => {
  const startedAt = new Date()
  const started = performance.now()
  const transport = new Transport(options.target)
  const rawControl = makeControl(options.target, options.control)
  const runSeed = options.seed ?? Math.floor(Math.random() * 0x7fffffff)
  const numRuns = options.numRuns ?? defaultNumRuns
  // fast-check runs no example at all for 0 or NaN, and every property would pass untested.
  if (!Number.isSafeInteger(numRuns) || numRuns < 1) throw new Error(`numRuns must be a whole number of at least 1, got ${String(options.numRuns)}`)
  const catalogue = options.catalogue ?? allChecks
  const selected = selectChecks(catalogue, options.checks, options.tags)
  // A selection that matches nothing would pass a run that checked nothing (a misspelt tag, say).
  if (selected.length === 0) throw new Error("no check matches the selection (a check must match one of the --check ids, if any, and one of the --tag tags, if any)")
  const tokenCheck =
    options.control !== undefined && !isControl(options.control)
      ? async () => {
          const wrong = makeControl(options.target, { ...options.control, token: "wrong-token-of-the-conformance-kit" } as HttpControlOptions)
          try {
            await wrong?.createClient()
            return 200
          } catch (error) {
            return error instanceof ControlError ? error.status : 0
          }
        }
      : undefined
  const doctor = await runDoctor(transport, rawControl, options.blackBox?.profile, tokenCheck)
  options.onDoctor?.(doctor)
  const profile = doctor.profile
  const runSecrets = new Set<string>()
  for (const credential of [options.blackBox?.credentials.primary, options.blackBox?.credentials.secondary]) if (credential !== undefined) runSecrets.add(credential.secret)
  const gated = rawControl === undefined || profile === undefined ? rawControl : gateControl(rawControl, declaredCapabilities(profile))
  const control = gated === undefined ? undefined : recordSecrets(gated, runSecrets)
  const entries = options.expectedFailures ?? []
  const reports: Array<CheckReport> = []
  for (const [index, check] of selected.entries()) {
    options.onProgress?.({ index, total: selected.length, checkId: check.id })
    const raw =
      profile === undefined
        ? {
            id: check.id,
            title: check.title,
            requirements: check.requirements,
            tags: check.tags,
            // Nothing of the implementation was tested: the run is incomplete (exit 2), its requirements untested.
            rawOutcome: "not-applicable" as const,
            seed: checkSeed(runSeed, check.id),
            durationMs: 0,
            violations: [],
            warnings: [],
            message: "no valid profile (see doctor)",
            replay: replayArgs(check.id, runSeed, undefined)
          }
        : await runOne(check, profile, control, options.blackBox?.credentials, transport, runSecrets, { runSeed, numRuns, path: options.path, replayPath: options.replayPath, timeoutMs: options.checkTimeoutMs ?? 120_000 })
    const expectation = entries.find((entry) => entry.checkId === check.id)
    const outcome = applyExpectation(raw.rawOutcome, expectation)
    const report: CheckReport = expectation === undefined ? { ...raw, outcome } : { ...raw, outcome, expectation }
    reports.push(report)
    options.onProgress?.({ index, total: selected.length, checkId: check.id, outcome, durationMs: report.durationMs })
  }
  const unused = unusedExpectations(entries, reports, new Set(catalogue.map((check) => check.id)), new Set(selected.map((check) => check.id)))
  const requirementReports = summarizeRequirements(reports)
  const fullRun = selected.length === catalogue.length
  return {
    kind: "custody-relay-conformance-statement",
    kit: { name: kitName, version: kitVersion },
    interfaceVersion,
    controlProtocolVersion,
    implementation: profile === undefined ? null : { name: profile.name, version: profile.version, interfaceVersion: profile.interfaceVersion },
    target: transport.description,
    mode: rawControl === undefined ? "black-box" : "control",
    startedAt: startedAt.toISOString(),
    durationMs: Math.round(performance.now() - started),
    seed: runSeed,
    numRuns,
    // Without a profile nothing of the target was tested, whatever the selection's requirements: never passed.
    status: profile === undefined ? "incomplete" : runStatus(reports, requirementReports, unused, fullRun),
    counts: countOutcomes(reports),
    checks: reports,
    requirements: requirementReports,
    unusedExpectations: unused,
    doctor: [...doctor.problems, ...doctor.notes.map((note) => `note: ${note}`)]
  }
}
