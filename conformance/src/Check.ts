/**
 * A conformance check: a stable, immutable id, the requirement ids it covers, tags for selection, the control
 * capabilities it needs, and a body that judges the target through a `CheckContext`.
 */
import fc from "fast-check"
import { CapabilityMissing, ControlError, type Control, type Need } from "./Control.js"
import { FixtureFailure, type Fixtures } from "./Fixtures.js"
import type { Profile } from "./Profile.js"
import { requirementById } from "./requirements.js"
import { formatExchange, type Exchange, type HttpResult, type Transport } from "./Transport.js"

export interface Check {
  readonly id: string
  readonly title: string
  readonly requirements: ReadonlyArray<string>
  readonly tags: ReadonlyArray<string>
  readonly needs: ReadonlyArray<Need>
  /** Credentials a black-box run must supply for this check (in addition to `primary`). */
  readonly blackBoxCredentials?: ReadonlyArray<"secondary">
  /** Checks that generate work warn when most answers are refusals (403/404). */
  readonly expectsWork?: boolean
  readonly run: (context: CheckContext) => Promise<void>
}

export interface Violation {
  readonly requirementIds: ReadonlyArray<string>
  readonly message: string
  readonly exchanges: ReadonlyArray<string>
}

/** Thrown when the profile does not declare what a check needs (the approval calls, say): not-applicable. */
export class NotDeclared extends Error {
  constructor(what: string) {
    super(`the profile does not declare ${what}`)
    this.name = "NotDeclared"
  }
}

/** An error of the kit's setting up, not of the implementation's answers (see `runProperty`). */
const isSetupProblem = (error: unknown): boolean =>
  error instanceof CapabilityMissing || error instanceof NotDeclared || error instanceof ControlError || error instanceof FixtureFailure

/** Thrown to stop a check at a violation. */
export class CheckFailure extends Error {
  constructor(readonly violation: Violation) {
    super(violation.message)
    this.name = "CheckFailure"
  }
}

export interface PropertyFailure {
  readonly seed: number
  readonly path: string | undefined
  readonly counterexample: string
  readonly numRuns: number
}

export interface RunSettings {
  readonly seed: number
  readonly numRuns: number
  readonly path: string | undefined
  /** fast-check's replayPath of a shrunk command sequence (model-based checks). */
  readonly replayPath?: string | undefined
}

/** Everything a check sees: the profile, fixtures, control, the raw transport and the judging helpers. */
export class CheckContext {
  readonly violations: Array<Violation> = []
  readonly warnings: Array<string> = []
  propertyFailure: PropertyFailure | undefined = undefined
  private runExchanges: Array<Exchange> = []
  private failingRunExchanges: Array<Exchange> | undefined = undefined
  /** Whether a run of the property being checked failed on the implementation's answer (see `tracked`). */
  private violationSeen = false
  private readonly recent: Array<Exchange> = []
  private refused = 0
  private answered = 0

  constructor(
    readonly check: Check,
    readonly profile: Profile,
    readonly settings: RunSettings,
    private readonly controlOrUndefined: Control | undefined,
    readonly fixturesFactory: (context: CheckContext) => Fixtures,
    baseTransport: Transport,
    /** Every API secret the control handed out during this run so far (for AUTH-SEC-1 scans). */
    readonly runSecrets: ReadonlySet<string> = new Set()
  ) {
    this.transport = baseTransport.withSink((exchange) => this.record(exchange))
    this.fixtures = fixturesFactory(this)
  }

  readonly transport: Transport
  readonly fixtures: Fixtures

  get control(): Control {
    if (this.controlOrUndefined === undefined) throw new Error("no control in this run; the check should have been gated")
    return this.controlOrUndefined
  }

  get hasControl(): boolean {
    return this.controlOrUndefined !== undefined
  }

  private record(exchange: Exchange): void {
    this.runExchanges.push(exchange)
    if (this.runExchanges.length > 200) this.runExchanges.shift()
    this.recent.push(exchange)
    if (this.recent.length > 8) this.recent.shift()
    if (exchange.path.startsWith("/relay/")) {
      this.answered += 1
      if (exchange.status === 403 || exchange.status === 404) this.refused += 1
    }
  }

  /** Fraction of relay answers that were 403 or 404, for the vacuity warning. */
  get refusalRatio(): { readonly refused: number; readonly answered: number } {
    return { refused: this.refused, answered: this.answered }
  }

  private exchangesFor(results: ReadonlyArray<HttpResult | Exchange>): Array<string> {
    const list = results.length > 0 ? results.map((item) => ("exchange" in item ? item.exchange : item)) : this.recent.slice(-3)
    return list.map((exchange) => formatExchange(exchange))
  }

  /** Stops the check with a violation of the given requirement ids. */
  fail(requirementIds: string | ReadonlyArray<string>, message: string, ...evidence: ReadonlyArray<HttpResult | Exchange>): never {
    throw new CheckFailure({ requirementIds: typeof requirementIds === "string" ? [requirementIds] : requirementIds, message, exchanges: this.exchangesFor(evidence) })
  }

  /** Fails unless the condition holds. */
  expect(condition: boolean, requirementIds: string | ReadonlyArray<string>, message: string, ...evidence: ReadonlyArray<HttpResult | Exchange>): void {
    if (!condition) this.fail(requirementIds, message, ...evidence)
  }

  /** Fails unless the answer has one of the statuses. */
  expectStatus(result: HttpResult, statuses: number | ReadonlyArray<number>, requirementIds: string | ReadonlyArray<string>, what: string): void {
    const allowed = typeof statuses === "number" ? [statuses] : statuses
    if (!allowed.includes(result.status)) this.fail(requirementIds, `${what}: expected ${allowed.join(" or ")}, got ${result.status}`, result)
  }

  /** Records a violation and goes on (used for SHOULD-level findings next to MUST assertions). */
  note(requirementIds: string | ReadonlyArray<string>, message: string, ...evidence: ReadonlyArray<HttpResult | Exchange>): void {
    this.violations.push({ requirementIds: typeof requirementIds === "string" ? [requirementIds] : requirementIds, message, exchanges: this.exchangesFor(evidence) })
  }

  warn(message: string): void {
    this.warnings.push(message)
  }

  /**
   * Runs a fast-check property with this check's seed, run count and replay path. A failure stops the check
   * with the seed, the path, the shrunk counterexample and the exchanges of the failing run.
   */
  async property<Ts extends [unknown, ...Array<unknown>]>(
    requirementIds: ReadonlyArray<string>,
    arbitraries: { [K in keyof Ts]: fc.Arbitrary<Ts[K]> },
    predicate: (...args: Ts) => Promise<void>,
    options: { readonly numRuns?: number } = {}
  ): Promise<void> {
    const numRuns = options.numRuns ?? this.settings.numRuns
    const tuple = fc.tuple(...(arbitraries as unknown as Array<fc.Arbitrary<unknown>>)) as unknown as fc.Arbitrary<Ts>
    const property = fc.asyncProperty(tuple, (args) => this.tracked(() => predicate(...args)))
    await this.runProperty(requirementIds, property as unknown as fc.IAsyncProperty<unknown>, numRuns)
  }

  /**
   * Runs one property run, keeping its exchanges when it fails (the last failing run is the shrunk one). Once a run
   * has failed on the implementation's answer, a later run that fails only on setting up (a fixture refused, a control
   * call missing) counts as passing: fast-check shrinks towards any failing run, and would otherwise end on a setup
   * problem and lose the violation it had found.
   */
  async tracked<T>(run: () => Promise<T>): Promise<T> {
    this.runExchanges = []
    try {
      return await run()
    } catch (error) {
      if (isSetupProblem(error)) {
        if (this.violationSeen) return undefined as T
      } else {
        this.violationSeen = true
      }
      this.failingRunExchanges = [...this.runExchanges]
      throw error
    }
  }

  /** Runs an already built asynchronous property (model-based runs use this). */
  async runProperty(requirementIds: ReadonlyArray<string>, property: fc.IAsyncProperty<unknown>, numRuns: number): Promise<void> {
    this.violationSeen = false
    const parameters: fc.Parameters<unknown> = { seed: this.settings.seed, numRuns, endOnFailure: false, interruptAfterTimeLimit: 45_000, markInterruptAsFailure: false }
    if (this.settings.path !== undefined) parameters.path = this.settings.path
    const details = await fc.check(property, parameters)
    if (!details.failed) return
    const counterexample = details.counterexample === null ? "(none)" : fc.stringify(details.counterexample)
    this.propertyFailure = { seed: details.seed, path: details.counterexamplePath ?? undefined, counterexample, numRuns: details.numRuns }
    const error = details.errorInstance
    // What the kit could not set up or reach (a control call the target does not offer, a fixture step it refused)
    // is no verdict on the property: it goes to the runner as it is, which files it as not-applicable or as a
    // harness error, never as a violation of the property's requirement ids.
    if (isSetupProblem(error)) throw error
    const inner = error instanceof CheckFailure ? error.violation : undefined
    const exchanges = (this.failingRunExchanges ?? []).slice(-6).map((exchange) => formatExchange(exchange))
    throw new CheckFailure({
      requirementIds: inner?.requirementIds ?? requirementIds,
      message:
        `property failed after ${details.numRuns} run(s), ${details.numShrinks} shrink(s)\n` +
        `seed ${details.seed}, path ${details.counterexamplePath ?? "(none)"}\n` +
        `shrunk counterexample: ${counterexample}\n` +
        (inner?.message ?? (error instanceof Error ? error.message : String(error))),
      exchanges
    })
  }

  /** Requirement ids of this check's violations whose level is MUST or PROFILE (a warn otherwise). */
  static isHard(violation: Violation): boolean {
    return violation.requirementIds.some((id) => requirementById(id)?.level !== "SHOULD")
  }
}

export const defineCheck = (check: Check): Check => check

