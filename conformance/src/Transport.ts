/**
 * The wire: sends one HTTP request to the target (a base URL or an in-process handler) and records the exchange,
 * so a failing check can print exactly what went over the wire. Secrets are redacted when exchanges are printed.
 */
export type Handler = (request: Request) => Promise<Response>

/**
 * `base` (a URL or a path, with or without trailing slashes) followed by `path`. Trimmed by a loop: `/\/+$/` retries
 * from every slash, quadratic on a run of them.
 */
export const joinPath = (base: string, path: string): string => {
  let end = base.length
  while (end > 0 && base[end - 1] === "/") end--
  return base.slice(0, end) + path
}

export type Target = { readonly baseUrl: string } | { readonly handler: Handler }

export interface Exchange {
  readonly method: string
  readonly path: string
  readonly requestHeaders: Readonly<Record<string, string>>
  readonly requestBody: string | undefined
  readonly status: number
  readonly responseHeaders: Readonly<Record<string, string>>
  readonly responseBody: string
  readonly durationMs: number
}

export interface HttpResult {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  /** The parsed JSON body, or undefined when the body is empty or not JSON. */
  readonly json: unknown
  readonly exchange: Exchange
}

export interface SendOptions {
  readonly headers?: Readonly<Record<string, string>>
  /** A raw body; sent as is, so checks can send malformed JSON. */
  readonly body?: string
}

const inProcessOrigin = "http://relay.conformance.invalid"

const headersToRecord = (headers: Headers): Record<string, string> => {
  const record: Record<string, string> = {}
  headers.forEach((value, key) => {
    record[key] = value
  })
  return record
}

export const parseJson = (text: string): unknown => {
  if (text.length === 0) return undefined
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}

export class Transport {
  constructor(
    readonly target: Target,
    private readonly onExchange: (exchange: Exchange) => void = () => undefined,
    private readonly timeoutMs = 15_000
  ) {}

  /** A transport on the same target that reports exchanges to another sink. */
  withSink(onExchange: (exchange: Exchange) => void): Transport {
    return new Transport(this.target, onExchange, this.timeoutMs)
  }

  get description(): string {
    return "baseUrl" in this.target ? this.target.baseUrl : "in-process handler"
  }

  async send(method: string, path: string, options: SendOptions = {}): Promise<HttpResult> {
    const headers: Record<string, string> = { ...(options.headers ?? {}) }
    if (options.body !== undefined && headers["content-type"] === undefined) headers["content-type"] = "application/json"
    const started = performance.now()
    const init: RequestInit = { method, headers, signal: AbortSignal.timeout(this.timeoutMs) }
    if (options.body !== undefined) init.body = options.body
    let response: Response
    if ("baseUrl" in this.target) {
      response = await fetch(joinPath(this.target.baseUrl, path), init)
    } else {
      response = await this.target.handler(new Request(inProcessOrigin + path, init))
    }
    const text = await response.text()
    const exchange: Exchange = {
      method,
      path,
      requestHeaders: headers,
      requestBody: options.body,
      status: response.status,
      responseHeaders: headersToRecord(response.headers),
      responseBody: text,
      durationMs: Math.round(performance.now() - started)
    }
    this.onExchange(exchange)
    return { status: response.status, headers: response.headers, text, json: parseJson(text), exchange }
  }
}

const secretHeaders = new Set(["x-api-secret", "x-control-token"])

/** Renders an exchange for a failure report, with secrets redacted. */
export const formatExchange = (exchange: Exchange, maxBody = 600): string => {
  const requestHeaders = Object.entries(exchange.requestHeaders)
    .map(([key, value]) => `${key}: ${secretHeaders.has(key.toLowerCase()) ? "<redacted>" : value}`)
    .join("; ")
  const clip = (text: string): string => (text.length > maxBody ? text.slice(0, maxBody) + "…" : text)
  const lines = [`> ${exchange.method} ${exchange.path}  [${requestHeaders}]`]
  if (exchange.requestBody !== undefined) lines.push(`> ${clip(exchange.requestBody)}`)
  lines.push(`< ${exchange.status} (${exchange.durationMs} ms)`)
  if (exchange.responseBody.length > 0) lines.push(`< ${clip(exchange.responseBody)}`)
  return lines.join("\n")
}
