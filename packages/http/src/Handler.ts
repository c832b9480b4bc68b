/**
 * The relay as a Web-standard handler, `(request: Request) => Promise<Response>`, with no web framework inside.
 * Each request goes through the same steps, in the order AUTH-ORDER-1 asks for:
 *   route (404, 405) -> credentials (401) -> rate limit (429) -> the route's permission (403)
 *   -> body read and parsed (413, 415, 400) -> Idempotency-Key -> decoding (400) -> the core operation
 * and every refusal, whatever raised it, becomes a response in exactly one place (`Reply.failure`); a defect
 * becomes a bare 500 whose cause goes to the log only. Each request gets an id (x-request-id, echoed) that every
 * log line of the request carries; credentials are never logged (AUTH-SEC-1).
 */
import {
  Authentication,
  CustodyProvider,
  EmbedderOptions,
  OutboxWorker,
  Principal,
  RateLimiter,
  Relay,
  RelayConfig,
  RelayError,
  Storage,
  Webhooks
} from "@custody-relay/core"
import { Cause, type Context, Effect, Exit, Fiber, Layer, Logger, LogLevel, ManagedRuntime, References, Result } from "effect"
import * as ApiReference from "./ApiReference.js"
import * as Control from "./Control.js"
import type { AnyError } from "./ErrorTable.js"
import { MethodNotAllowed, RateLimited, RouteNotFound } from "./HttpError.js"
import * as Health from "./Health.js"
import * as Idempotency from "./Idempotency.js"
import * as Incoming from "./Incoming.js"
import * as JsonLogLines from "./JsonLogLines.js"
import * as LogCapture from "./LogCapture.js"
import * as Mounting from "./Mounting.js"
import * as OpenApi from "./OpenApi.js"
import * as RateLimitPolicies from "./RateLimitPolicies.js"
import * as Reply from "./Reply.js"
import { parseJson, readText } from "./RequestBody.js"
import * as RequestLine from "./RequestLine.js"
import * as Router from "./Router.js"
import { type Route, routes } from "./Routes.js"

export interface HandlerOptions<E = never> {
  /** The domain's services; `Relay.layerMemory()` by default, `Relay.layer(storage)` for a database. */
  readonly layer?: Layer.Layer<Relay.RelayServices, E>
  /** Approval quorum of new accounts, activation on approval (our profile). */
  readonly config?: EmbedderOptions.Given<RelayConfig.RelayConfigShape>
  /** Requests per window per API key; 600 per 60 s by default. */
  readonly rateLimit?: RateLimitPolicies.RateLimitOptions
  /** Largest request body accepted, in bytes (64 KiB by default); larger is 413. */
  readonly maxBodyBytes?: number
  /** How long an Idempotency-Key keeps its answer for replay; 24 h by default. */
  readonly idempotency?: { readonly ttlSeconds?: number | undefined }
  /** Where log lines go; one JSON line per entry on stdout by default (see JsonLogLines). */
  readonly logger?: Logger.Logger<unknown, unknown>
  /** Info by default: a line per command, per refused or failed request and per slow read; Debug adds every read's (RequestLine). */
  readonly logLevel?: LogLevel.LogLevel
  /** From how long a successful read's line is logged at Info rather than Debug; 1000 ms by default (RequestLine). */
  readonly slowReadMillis?: number
  /**
   * Register Effect spans (each core operation is a span, see core's Operation.ts). Off by default: without an
   * exporter installed they cost a stack capture and allocations on every call and tell no one anything. Turn on
   * with a tracer layer.
   */
  readonly tracing?: boolean
  /**
   * Mounts the test control protocol at /__control, guarded by this token. Never set it in production. An empty or
   * blank token throws: it would let any caller in (`controlToken: process.env.X ?? ""` must not open the protocol).
   */
  readonly controlToken?: string
  /**
   * The outbox worker (core OutboxWorker) that carries out provider calls after commit, run for the life of the
   * handler: on by default, with the worker's defaults. `false` leaves it to the embedder (`runtime.runFork(
   * OutboxWorker.run())`), e.g. to run it in another process.
   */
  readonly outbox?: false | EmbedderOptions.Given<OutboxWorker.WorkerOptions>
  /** Webhook deliveries' timeout, the secret rotation grace, and whether private targets are allowed. */
  readonly webhooks?: EmbedderOptions.Given<Webhooks.WebhookSettingsShape>
  /** A path in front of `/relay/v1` (and of `/__control`): `"/custody"` serves `/custody/relay/v1/...`. None by default. */
  readonly basePath?: string
  /** Browser callers from other origins (see Mounting.ts). Off by default: no CORS header is ever sent. */
  readonly cors?: Mounting.CorsOptions
  /** Serves the API reference at /docs and a page at / with this renderer (see ApiReference.ts). None by default. */
  readonly reference?: ApiReference.ReferenceOptions
}

/**
 * The handler's pipeline on a request already in the pipeline's own terms (see Incoming): the finished reply, at
 * once when nothing in it had to wait (a read on SQLite), else a promise of it. The node adapter uses it to skip
 * building a `Request` and a `Response` for every call.
 */
export const serveIncoming: unique symbol = Symbol.for("@custody-relay/http/serveIncoming")

export interface RelayHandler<E = never> {
  (request: Request): Promise<Response>
  readonly [serveIncoming]: (request: Incoming.Incoming) => Reply.Reply | Promise<Reply.Reply>
  /** Settles once the layers are built (storage opened, migrations run); rejects with the start-up failure. */
  readonly ready: Promise<void>
  /** Runs Effect programs (administration, seeding) against the same services as the handler. */
  readonly runtime: ManagedRuntime.ManagedRuntime<Relay.RelayServices, E>
  /** Releases the services (closes the database). Requests still running are allowed to finish first. */
  readonly dispose: () => Promise<void>
  readonly [Symbol.asyncDispose]: () => Promise<void>
}

interface RequestState {
  rateHeaders: Readonly<Record<string, string>>
  /** Safe to log: a key id identifies but does not authenticate (AUTH-KEY-1). */
  keyId: string | undefined
  /** Why the request was answered 503: the storage error's message, one line, for the request's own line. */
  unavailable?: string
  /** The request's count against its key's budget, so that a second run of it is not counted again. */
  counted?: RateLimitPolicies.Counted
}

export const DEFAULT_MAX_BODY_BYTES = 64 * 1024

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

const requestIdOf = (request: Incoming.Incoming): string => {
  const given = request.header("x-request-id")
  return given !== null && REQUEST_ID.test(given) ? given : crypto.randomUUID()
}

/** Builds the handler and its runtime. The layers are built once, in the background; call `ready` to wait. */
export const makeHandler = <E = never>(options: HandlerOptions<E> = {}): RelayHandler<E> => {
  const relayLayer = options.layer ?? (Relay.layerMemory() as Layer.Layer<Relay.RelayServices, E>)
  // Every option is checked here, before anything is built: a bad number throws a RangeError naming it.
  const config: RelayConfig.RelayConfigShape = RelayConfig.make({
    ...options.config,
    ...(options.idempotency?.ttlSeconds === undefined ? {} : { idempotencyKeyTtlSeconds: options.idempotency.ttlSeconds })
  })
  const outbox = options.outbox === false ? false : OutboxWorker.optionsOf(options.outbox)
  const webhookSettings = Webhooks.settingsOf(options.webhooks)
  // The default output gathers Info lines and writes them together (see JsonLogLines); disposing flushes it.
  const jsonLines = options.logger === undefined ? JsonLogLines.make() : undefined
  const outputLogger = options.logger ?? jsonLines?.logger ?? Logger.consoleJson
  const outputLevel = options.logLevel ?? "Info"
  // With the control protocol mounted, every request's line is also kept for its GET /logs, whatever its level.
  const logs = options.controlToken === undefined ? undefined : LogCapture.make(outputLogger, outputLevel)
  // A request's line is built only where it goes somewhere: to the output at its level, or to the capture.
  const logsRequestAt = (level: LogLevel.LogLevel) => logs !== undefined || LogLevel.isGreaterThanOrEqualTo(level, outputLevel)
  // On the default output with nothing capturing, the request line goes to it directly, without an Effect log
  // entry: the same line, for a fraction of the cost (JsonLogLines.plain; docs/benchmarks.md, sixth round).
  const requestLines = logs === undefined ? jsonLines : undefined
  const slowReadMillis = options.slowReadMillis ?? RequestLine.DEFAULT_SLOW_READ_MILLIS
  const logging = Layer.mergeAll(
    Logger.layer([logs === undefined ? outputLogger : logs.logger]),
    Layer.succeed(
      References.MinimumLogLevel,
      logs === undefined ? outputLevel : LogCapture.lowerOf(outputLevel, RequestLine.MOST_VERBOSE)
    )
  )
  const layer = Layer.mergeAll(
    relayLayer,
    Layer.succeed(RelayConfig.RelayConfig, config),
    Layer.succeed(Webhooks.WebhookSettings, webhookSettings),
    Layer.succeed(References.TracerEnabled, options.tracing ?? false)
  ).pipe(
    // Given to the layers' own building too: what they log (a database unreachable at start-up) and the fibers they
    // fork for the runtime's life (a synced rate limiter's rounds) go to the same output, at the same level, as the
    // requests' lines, not to Effect's default logger.
    Layer.provideMerge(logging)
  )
  const runtime = ManagedRuntime.make(layer)
  const maxBodyBytes = EmbedderOptions.wholeNumber("maxBodyBytes", options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES, 1)
  const policies = RateLimitPolicies.make(options.rateLimit)
  const providerFaults: Control.ProviderFaults = new Map()
  const control = options.controlToken === undefined
    ? undefined
    : Control.make({
      token: options.controlToken,
      policies,
      providerFaults,
      maxBodyBytes,
      logs: logs?.capture ?? { drain: () => [] }
    })
  const router = Router.make(routes)
  const mounting = Mounting.make(options)
  const pages = options.reference === undefined ? undefined : ApiReference.make(options.reference, mounting.basePath)
  let openApiBody: string | undefined
  const openApi = (): Reply.Reply => {
    openApiBody ??= JSON.stringify(OpenApi.make(routes, { basePath: mounting.basePath }))
    return { status: 200, body: openApiBody, headers: {} }
  }

  /**
   * The API proper. `state` collects what later steps learn (the X-RateLimit-* headers, so refusals after
   * authentication carry them too, and the key id for the log line).
   */
  const api = Effect.fnUntraced(function*(request: Incoming.Incoming, state: RequestState) {
    const match = router(request.method, request.pathname)
    if (match._tag === "NotFound") return yield* new RouteNotFound()
    if (match._tag === "MethodNotAllowed") return yield* new MethodNotAllowed({ method: request.method, allow: match.allow })
    const route = match.route
    return yield* Authentication.authenticated(
      request.header("x-api-key"),
      request.header("x-api-secret"),
      (principal) => authorizedCall(request, state, route, match.params, principal)
    )
  })

  /** Everything after authentication: rate limit, permission, body, Idempotency-Key, the operation. */
  const authorizedCall = Effect.fnUntraced(function*(
    request: Incoming.Incoming,
    state: RequestState,
    route: Route,
    params: Readonly<Record<string, string>>,
    principal: Principal.Principal
  ) {
    state.keyId = principal.keyId
    const limiter = yield* RateLimiter.RateLimiter
    const policy = policies.policyFor(principal)
    const decision = yield* (state.counted === undefined
      ? limiter.consume(principal.keyId, policy)
      : RateLimitPolicies.countAgain(limiter, principal.keyId, policy, state.counted))
    state.counted = { policy, decision }
    state.rateHeaders = RateLimitPolicies.headers(decision)
    if (!decision.allowed) return yield* new RateLimited({ retryAfterSeconds: decision.retryAfterSeconds })

    // AUTH-ORDER-1: the permission is checked before the body is even read.
    yield* Principal.authorize(principal, route.operation)

    const text = route.method === "POST" ? yield* readText(request, maxBodyBytes) : ""
    const body = parseJson(text, request.header("content-type"))
    if (Result.isFailure(body)) return yield* body.failure

    const fault = principal.clientId === null || providerFaults.size === 0 ? undefined : providerFaults.get(principal.clientId)
    const operation = route.handle(principal, { params, search: Incoming.searchParams(request), body: body.success })
    const work = Effect.map(
      fault === undefined ? operation : Effect.updateService(operation, CustodyProvider.CustodyProvider, Control.faultyProvider(fault)),
      (value) => Reply.json(route.successStatus, value)
    )
    const key = route.method === "POST" ? request.header(Idempotency.HEADER) : null
    if (key === null) return yield* work
    if (!Idempotency.isValidKey(key)) {
      return yield* RelayError.InvalidRequest.field(Idempotency.HEADER, Idempotency.KEY_RULE)
    }
    return yield* Idempotency.run(principal.keyId, key, Idempotency.fingerprint(request.method, request.pathname, text), work)
  })

  /** The request through the API (or the control protocol, or the OpenAPI document) to its finished reply. */
  const respond = Effect.fnUntraced(function*(
    request: Incoming.Incoming,
    startedAt: number,
    requestAnnotations: { readonly requestId: string; readonly method: string; readonly path: string }
  ) {
    const { requestId } = requestAnnotations
    const state: RequestState = { rateHeaders: {}, keyId: undefined }
    const { pathname } = request
    const isControl = control !== undefined && (pathname === Control.PREFIX || pathname.startsWith(`${Control.PREFIX}/`))
    const probe = Health.probe(request.method, pathname)
    const program: Effect.Effect<Reply.Reply, AnyError, Relay.RelayServices> = isControl
      ? control(request)
      : (request.method === "GET" || request.method === "HEAD") && pathname === OpenApi.PATH
      ? Effect.sync(openApi)
      : probe !== undefined
      ? probe
      : api(request, state)
    const reply = yield* program.pipe(
      // The one place a refusal becomes an answer.
      Effect.catch((error: AnyError) => Effect.succeed(Reply.failure(error, requestId))),
      Effect.catchCause((cause) => {
        // The storage unavailable or busy is not a bug: the answer is 503 with Retry-After.
        const unavailable = Storage.transientErrorIn(cause)
        if (unavailable === undefined) return Effect.as(Effect.logError("request failed with a defect", Cause.pretty(cause)), Reply.defect(requestId))
        // An outage is said in the request's own line, with its error's message: a stack, or a line of its own, would
        // add nothing but lines, one more for every request the outage refuses.
        state.unavailable = unavailable.message
        return Effect.succeed(Reply.unavailable(requestId))
      })
    )
    const status = reply.status
    const durationMs = Math.round(performance.now() - startedAt)
    const level = RequestLine.levelOf(request.method, status, durationMs, slowReadMillis)
    if (logsRequestAt(level)) {
      const { keyId, unavailable } = state
      if (requestLines === undefined || level === "Warn") {
        yield* Effect.logWithLevel(level)("request").pipe(
          Effect.annotateLogs(keyId === undefined ? { status, durationMs } : { status, durationMs, keyId }),
          Effect.annotateLogs(unavailable === undefined ? {} : { error: unavailable })
        )
      } else {
        // The annotations in the order Effect's entry would hold them; the generator runs on the request's fiber,
        // so the current fiber is the one that entry would name.
        const { method, path } = requestAnnotations
        const annotations = keyId === undefined
          ? { requestId, method, path, status, durationMs }
          : { requestId, method, path, status, durationMs, keyId }
        requestLines.plain(level, "request", annotations, Fiber.getCurrent()?.id ?? 0)
      }
    }
    return Reply.finish(reply, requestId, state.rateHeaders)
  })

  const serve = (request: Incoming.Incoming, requestId: string, startedAt: number) => {
    // Every log line of the request carries these (the request line written without Effect's entry too).
    const requestAnnotations = { requestId, method: request.method, path: request.pathname }
    return Effect.annotateLogs(respond(request, startedAt, requestAnnotations), requestAnnotations)
  }

  // Once the layers are built, requests run on their context directly: a request that never waits (a read on
  // SQLite) completes inside `runForkWith`, with no promise between it and its reply.
  let context: Context.Context<Relay.RelayServices> | undefined
  const settle = (requestId: string) => (exit: Exit.Exit<Reply.Reply, unknown>): Reply.Reply =>
    // Only a runtime being disposed fails here: the pipeline itself answers every error and defect.
    Exit.isSuccess(exit) ? exit.value : Reply.finishedDefect(requestId)

  const serveRequest = (original: Incoming.Incoming): Reply.Reply | Promise<Reply.Reply> => {
    const preflight = mounting.preflight(original)
    if (preflight !== undefined) return preflight
    const requestId = requestIdOf(original)
    // Nothing can be served without the services that did not start: each request is told to go elsewhere or
    // retry, and a liveness probe fails, so a supervisor restarts the process.
    const notStarted = () => mounting.finish(original, Reply.finish(Reply.unavailable(requestId), requestId, {}))
    if (startFailed) return notStarted()
    const request = mounting.inside(original)
    const finish = (exit: Exit.Exit<Reply.Reply, unknown>) => mounting.finish(original, settle(requestId)(exit))
    if (request === undefined) return mounting.finish(original, Reply.finish(Reply.failure(new RouteNotFound(), requestId), requestId, {}))
    const page = pages?.(request.method, request.pathname)
    if (page !== undefined) return page
    // Before the services are built, a request waits for them; if they fail to start, it is told so (503) as every
    // later request is, not answered as a defect.
    if (context === undefined) {
      return ready.then(() => serveRequest(original), notStarted)
    }
    const program = serve(request, requestId, performance.now())
    const fiber = Effect.runForkWith(context)(program)
    const exit = fiber.pollUnsafe()
    if (exit !== undefined) return finish(exit)
    return new Promise((resolve) => fiber.addObserver((exit) => resolve(finish(exit))))
  }

  const handler = async (request: Request): Promise<Response> => {
    let incoming: Incoming.Incoming
    try {
      incoming = Incoming.fromRequest(request)
    } catch {
      // Only a request URL the platform itself cannot parse lands here.
      const requestId = crypto.randomUUID()
      return Reply.toResponse(Reply.finishedDefect(requestId))
    }
    return Reply.toResponse(await serveRequest(incoming), incoming.method)
  }

  let worker: Fiber.Fiber<unknown, unknown> | undefined
  let startFailed = false
  const ready = runtime.context().then((built) => {
    context = built
    if (outbox !== false) worker = Effect.runForkWith(built)(OutboxWorker.run(outbox))
  })
  // The worker stops before the services it uses are released.
  const dispose = async () => {
    if (worker !== undefined) await Effect.runPromise(Fiber.interrupt(worker))
    await runtime.dispose()
    jsonLines?.flush()
  }
  // A start-up failure (the database unreachable past its start-up bound, a migration that failed) is reported
  // through `ready`, logged once as an error with its cause (the request logger lived in the services that did not
  // start), and answered 503 with Retry-After to every request; it must not crash the process unobserved.
  ready.catch((cause: unknown) => {
    startFailed = true
    Effect.runFork(
      Effect.logError("the relay did not start: every request is answered 503 until the process is restarted (await handler.ready to stop instead)").pipe(
        Effect.annotateLogs({ error: cause instanceof Error ? cause.message : String(cause) }),
        Effect.provide(Logger.layer([outputLogger]))
      )
    )
    jsonLines?.flush()
  })
  return Object.assign(handler, {
    [serveIncoming]: serveRequest,
    ready,
    runtime,
    dispose,
    [Symbol.asyncDispose]: dispose
  })
}
