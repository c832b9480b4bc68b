/**
 * Refusals that belong to HTTP itself rather than to the custody domain: a body that is not JSON, a media type or
 * size the adapter does not take, a route or method that does not exist, a spent rate-limit budget, and the
 * Idempotency-Key conflicts. Like the core's errors they carry no status code; the error table maps them.
 */
import { Refusal } from "@custody-relay/core"
import { Schema } from "effect"

export class MalformedJson extends Refusal.TaggedRefusal<MalformedJson>()("MalformedJson", {
  message: Schema.String
}) {}

export class UnsupportedMediaType extends Refusal.TaggedRefusal<UnsupportedMediaType>()("UnsupportedMediaType", {
  contentType: Schema.String
}) {
  override get message() {
    return "Content-Type must be application/json"
  }
}

export class PayloadTooLarge extends Refusal.TaggedRefusal<PayloadTooLarge>()("PayloadTooLarge", {
  limitBytes: Schema.Number
}) {
  override get message() {
    return `request body exceeds ${this.limitBytes} bytes`
  }
}

export class RouteNotFound extends Refusal.TaggedRefusal<RouteNotFound>()("RouteNotFound", {}) {
  override get message() {
    return "no such endpoint"
  }
}

export class MethodNotAllowed extends Refusal.TaggedRefusal<MethodNotAllowed>()("MethodNotAllowed", {
  method: Schema.String,
  allow: Schema.Array(Schema.String)
}) {
  override get message() {
    return `method not allowed; allowed: ${this.allow.join(", ")}`
  }
}

export class RateLimited extends Refusal.TaggedRefusal<RateLimited>()("RateLimited", {
  retryAfterSeconds: Schema.Number
}) {
  override get message() {
    return `rate limit exceeded; retry after ${this.retryAfterSeconds} seconds`
  }
}

/** The same Idempotency-Key was used before with a different request (method, path or body). */
export class IdempotencyKeyReused extends Refusal.TaggedRefusal<IdempotencyKeyReused>()("IdempotencyKeyReused", {}) {
  override get message() {
    return "this Idempotency-Key was already used with a different request"
  }
}

/** The first request made with this Idempotency-Key has not finished yet. */
export class IdempotencyRequestInProgress extends Refusal.TaggedRefusal<IdempotencyRequestInProgress>()(
  "IdempotencyRequestInProgress",
  {}
) {
  override get message() {
    return "a request with this Idempotency-Key is still in progress; retry later"
  }
}

/** The control protocol's token is missing or wrong. */
export class ControlUnauthorized extends Refusal.TaggedRefusal<ControlUnauthorized>()("ControlUnauthorized", {}) {
  override get message() {
    return "missing or wrong x-control-token"
  }
}

/** A control call this implementation does not offer. */
export class ControlCallUnsupported extends Refusal.TaggedRefusal<ControlCallUnsupported>()("ControlCallUnsupported", {}) {
  override get message() {
    return "this control call is not supported"
  }
}

export type HttpError =
  | MalformedJson
  | UnsupportedMediaType
  | PayloadTooLarge
  | RouteNotFound
  | MethodNotAllowed
  | RateLimited
  | IdempotencyKeyReused
  | IdempotencyRequestInProgress
  | ControlUnauthorized
  | ControlCallUnsupported

export type HttpErrorTag = HttpError["_tag"]
