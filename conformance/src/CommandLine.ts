/**
 * The command line, as a function so that a script can run it against an in-process target:
 * `runCli(argv, io, overrides)` parses flags, runs the kit (or `doctor`, `--coverage`, `--list`), prints the
 * chosen report and returns the exit code (0 only when everything expected passed).
 */
import { readFile, writeFile } from "node:fs/promises"
import { parseArgs } from "node:util"
import { allChecks } from "./checks/index.js"
import { formatCoverage } from "./Coverage.js"
import { faults } from "./faults/catalogue.js"
import { runDoctor } from "./Doctor.js"
import { parseExpectations, type ExpectedFailure } from "./Expectations.js"
import type { BlackBoxCredentials } from "./Fixtures.js"
import { exitCodeOf, type Report } from "./Report.js"
import { formatConsole, progressLine } from "./reporters/console.js"
import { formatJson } from "./reporters/json.js"
import { formatJunit } from "./reporters/junit.js"
import { makeControl, runConformance, type HttpControlOptions, type RunOptions } from "./Runner.js"
import { isRecord } from "./Shape.js"
import { joinPath, Transport, type Target } from "./Transport.js"
import type { Control } from "./Control.js"

export interface CliIo {
  readonly stdout: (text: string) => void
  readonly stderr: (text: string) => void
  readonly isTty: boolean
}

export interface CliOverrides {
  /** An in-process target, used when no --base-url is given. */
  readonly target?: Target
  readonly control?: Control | HttpControlOptions
}

export const usage = `custody-relay-conformance [doctor] [options]

  --base-url URL            the server under test (its /relay/v1 lives below it)
  --control-url URL         the test control protocol base (default: {base-url}/__control)
  --control-token TOKEN     the x-control-token of the control protocol
  --config FILE             JSON config: baseUrl, controlUrl, controlToken, or black-box
                            credentials {primary, secondary} with the implementation's profile
  --check ID                run only this check (repeatable; exact ids)
  --tag TAG                 run only checks with this tag (repeatable; with --check, a check must
                            match both)
  --seed N                  run seed (each check derives its own from it)
  --num-runs N              property runs per check (default 100)
  --path PATH               fast-check replay path (with --check and --seed)
  --replay-path P           replayPath of a model-based counterexample (printed with it)
  --expected-failures FILE  the implementation's expected failures: {"<check id>": {"reason": "..."}}
  --rerun-failed REPORT     re-run the failing checks of a JSON report with its seed
  --reporter R              console (default), json or junit
  --output FILE             also write the report to FILE (JSON for the console reporter)
  --coverage                print each requirement with its checks and the faults that prove them, and exit
  --list                    list the checks and exit
`

const reporters = ["console", "json", "junit"]

const readJson = async (file: string): Promise<unknown> => JSON.parse(await readFile(file, "utf8")) as unknown

const credentialOf = (value: unknown): { keyId: string; secret: string } | undefined =>
  isRecord(value) && typeof value["keyId"] === "string" && typeof value["secret"] === "string" ? { keyId: value["keyId"], secret: value["secret"] } : undefined

/** Why a fetch failed, as its cause names it (ECONNREFUSED, ENOTFOUND, ...) when it has one. */
const causeOf = (error: unknown): string => {
  const cause: unknown = error instanceof Error ? error.cause : undefined
  const code = typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string" ? cause.code : undefined
  if (code !== undefined) return code
  if (cause instanceof Error) return cause.message
  return error instanceof Error ? error.message : String(error)
}

/** What stops a run before any check: the target or the control unreachable, or the control's token refused. */
const harnessProblem = async (baseUrl: string, control: Control | HttpControlOptions | undefined): Promise<string | undefined> => {
  try {
    await fetch(joinPath(baseUrl, "/relay/v1/accounts"), { signal: AbortSignal.timeout(10_000) })
  } catch (error) {
    return `cannot reach the target at ${baseUrl}: ${causeOf(error)}`
  }
  if (control === undefined || !("token" in control) || typeof control.url !== "string") return undefined
  try {
    const answer = await fetch(joinPath(control.url, "/profile"), { headers: { "x-control-token": control.token }, signal: AbortSignal.timeout(10_000) })
    if (answer.status === 401) return `the control at ${control.url} refuses the control token (401)`
  } catch (error) {
    return `cannot reach the control at ${control.url}: ${causeOf(error)}`
  }
  return undefined
}

export const runCli = async (argv: ReadonlyArray<string>, io: CliIo, overrides: CliOverrides = {}): Promise<number> => {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      "base-url": { type: "string" },
      "control-url": { type: "string" },
      "control-token": { type: "string" },
      config: { type: "string" },
      check: { type: "string", multiple: true },
      tag: { type: "string", multiple: true },
      seed: { type: "string" },
      "num-runs": { type: "string" },
      path: { type: "string" },
      "replay-path": { type: "string" },
      "expected-failures": { type: "string" },
      "rerun-failed": { type: "string" },
      reporter: { type: "string" },
      output: { type: "string" },
      coverage: { type: "boolean" },
      list: { type: "boolean" },
      help: { type: "boolean" }
    }
  })
  if (values.help === true) {
    io.stdout(usage)
    return 0
  }
  if (values.coverage === true) {
    io.stdout(formatCoverage(allChecks, faults) + "\n")
    return 0
  }
  if (values.list === true) {
    for (const check of allChecks) io.stdout(`${check.id}  [${check.requirements.join(", ")}]  tags: ${check.tags.join(", ")}${check.needs.length > 0 ? `  needs: ${check.needs.join(", ")}` : ""}\n`)
    return 0
  }
  const config = values.config === undefined ? {} : await readJson(values.config)
  if (!isRecord(config)) throw new Error("the config file must hold a JSON object")
  const baseUrl = values["base-url"] ?? (typeof config["baseUrl"] === "string" ? config["baseUrl"] : undefined)
  const target: Target | undefined = baseUrl !== undefined ? { baseUrl } : overrides.target
  if (target === undefined) {
    io.stderr("no target: give --base-url or a config with baseUrl\n\n" + usage)
    return 2
  }
  const controlToken = values["control-token"] ?? (typeof config["controlToken"] === "string" ? config["controlToken"] : undefined)
  const controlUrl = values["control-url"] ?? (typeof config["controlUrl"] === "string" ? config["controlUrl"] : undefined)
  if (controlUrl !== undefined && controlToken === undefined) {
    io.stderr("--control-url needs --control-token (or controlToken in the config): without it the run would be black-box\n")
    return 2
  }
  let control: Control | HttpControlOptions | undefined
  if (controlToken !== undefined) control = controlUrl === undefined ? { token: controlToken, ...(baseUrl === undefined ? {} : { url: joinPath(baseUrl, "/__control") }) } : { token: controlToken, url: controlUrl }
  else if (baseUrl === undefined) control = overrides.control
  let blackBox: RunOptions["blackBox"]
  const credentials = isRecord(config["credentials"]) ? config["credentials"] : undefined
  if (control === undefined && credentials !== undefined) {
    const primary = credentialOf(credentials["primary"])
    if (primary === undefined) throw new Error("black-box config: credentials.primary needs keyId and secret")
    const secondary = credentialOf(credentials["secondary"])
    const set: BlackBoxCredentials = secondary === undefined ? { primary } : { primary, secondary }
    blackBox = { credentials: set, profile: config["profile"] }
  }
  // A target or control that cannot be reached, or a refused control token, is the harness's problem, not 56
  // failures of the implementation: say which, and exit 2.
  if (baseUrl === undefined) io.stderr("conformance: in-process run: the target is a handler in this process, with no network between it and the kit; use --base-url to test a started server\n")
  if (baseUrl !== undefined) {
    const unreachable = await harnessProblem(baseUrl, control)
    if (unreachable !== undefined) {
      io.stderr(`harness: ${unreachable}\n`)
      return 2
    }
  }
  if (positionals[0] === "doctor") {
    const result = await runDoctor(new Transport(target), makeControl(target, control), blackBox?.profile)
    for (const problem of result.problems) io.stdout(`problem: ${problem}\n`)
    for (const note of result.notes) io.stdout(`note: ${note}\n`)
    for (const [capability, state] of Object.entries(result.capabilities)) io.stdout(`capability ${capability}: ${state}\n`)
    io.stdout(result.ok ? "doctor: the target answers as the protocol says\n" : "doctor: problems found\n")
    return result.ok ? 0 : 1
  }
  let expectedFailures: ReadonlyArray<ExpectedFailure> = []
  if (values["expected-failures"] !== undefined) {
    const parsed = parseExpectations(await readJson(values["expected-failures"]))
    if (!parsed.ok) {
      io.stderr(`expected-failures file: ${parsed.problems.join("; ")}\n`)
      return 2
    }
    expectedFailures = parsed.entries
  }
  const reporter = values.reporter ?? "console"
  if (!reporters.includes(reporter)) {
    io.stderr(`--reporter must be one of ${reporters.join(", ")}, got ${JSON.stringify(reporter)}\n`)
    return 2
  }
  let checks = values.check
  let seed = values.seed === undefined ? undefined : Number(values.seed)
  let numRuns = values["num-runs"] === undefined ? undefined : Number(values["num-runs"])
  if (values["rerun-failed"] !== undefined) {
    const previous = (await readJson(values["rerun-failed"])) as Partial<Report>
    const failed = (previous.checks ?? []).filter((check) => ["fail", "warn", "harness-error", "unexpected-pass"].includes(check.outcome)).map((check) => check.id)
    if (failed.length === 0) {
      io.stdout("the report has no failing check to re-run\n")
      return 0
    }
    checks = failed
    seed = seed ?? previous.seed
    numRuns = numRuns ?? previous.numRuns
  }
  if (seed !== undefined && !Number.isSafeInteger(seed)) throw new Error("--seed must be an integer")
  if (numRuns !== undefined && !(Number.isSafeInteger(numRuns) && numRuns >= 1)) throw new Error("--num-runs must be a whole number of at least 1")
  const options: RunOptions = {
    target,
    ...(control === undefined ? {} : { control }),
    ...(blackBox === undefined ? {} : { blackBox }),
    ...(checks === undefined ? {} : { checks }),
    ...(values.tag === undefined ? {} : { tags: values.tag }),
    ...(seed === undefined ? {} : { seed }),
    ...(numRuns === undefined ? {} : { numRuns }),
    ...(values.path === undefined ? {} : { path: values.path }),
    ...(values["replay-path"] === undefined ? {} : { replayPath: values["replay-path"] }),
    expectedFailures,
    onProgress: progressLine(io.stderr, io.isTty),
    onDoctor: (doctor) => {
      for (const problem of doctor.problems) io.stderr(`doctor: problem: ${problem}\n`)
      for (const note of doctor.notes.filter((line) => line.startsWith("warning:") || line.startsWith("round trips:"))) io.stderr(`doctor: ${note}\n`)
      const missing = Object.entries(doctor.capabilities).filter(([, state]) => state === "missing").map(([name]) => name)
      if (missing.length > 0) io.stderr(`doctor: missing control calls: ${missing.join(", ")} (checks needing them are not applicable)\n`)
    }
  }
  const report = await runConformance(options)
  const text = reporter === "json" ? formatJson(report) : reporter === "junit" ? formatJunit(report) : formatConsole(report)
  io.stdout(text)
  if (values.output !== undefined) await writeFile(values.output, reporter === "console" ? formatJson(report) : text)
  return exitCodeOf(report.status)
}
