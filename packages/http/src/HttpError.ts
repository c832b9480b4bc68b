/**
 * Refusals that belong to HTTP itself rather than to the custody domain: a body that is not JSON, a media type or
 * size the adapter does not take, a route or method that does not exist, a spent rate-limit budget, the test
 * control protocol's own. Like the core's errors
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
  | ControlUnauthorized
  | ControlCallUnsupported

export type HttpErrorTag = HttpError["_tag"]
