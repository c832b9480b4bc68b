/**
 * The whole domain wired together. `layerMemory` runs everything in-process (memory storage, the simulated
 * custody provider, static CAD rates, UUIDv7 ids); `layer` takes any Storage and RateLimiter (e.g. the SQL
 * adapter's) and supplies the rest, each part replaceable by providing your own service instead.
 */
import { Layer } from "effect"
import * as ApiUser from "./ApiUser.js"
import { Assets } from "./Asset.js"
import * as CustodyProvider from "./CustodyProvider.js"
import { Ids } from "./Ids.js"
import { RateLimiter } from "./RateLimiter.js"
import * as Rates from "./Rates.js"
import { Storage } from "./Storage.js"
import * as Webhooks from "./Webhooks.js"

/** Every service the operations need. */
export type RelayServices =
  | Storage
  | RateLimiter
  | Assets
  | CustodyProvider.CustodyProvider
  | CustodyProvider.SimulatedProviderControls
  | Rates.Rates
  | Ids
  | Webhooks.WebhookTransport

export interface RelayOptions {
  readonly assets?: Layer.Layer<Assets>
  readonly provider?: Layer.Layer<CustodyProvider.CustodyProvider | CustodyProvider.SimulatedProviderControls>
  readonly rates?: Layer.Layer<Rates.Rates>
  readonly ids?: Layer.Layer<Ids>
  readonly webhookTransport?: Layer.Layer<Webhooks.WebhookTransport>
  /** A faster implementation of the secret's SHA-256 for this runtime (see ApiUser.SecretDigest); @noble/hashes otherwise. */
  readonly secretDigest?: (secret: string) => string
}

/** The domain's services around a given storage (and rate limiter). */
export const layer = <E, R>(
  storage: Layer.Layer<Storage | RateLimiter, E, R>,
  options: RelayOptions = {}
): Layer.Layer<RelayServices, E, R> =>
  Layer.mergeAll(
    storage,
    options.assets ?? Assets.layer,
    options.provider ?? CustodyProvider.layerSimulated(),
    options.rates ?? Rates.layerStatic(),
    options.ids ?? Ids.layer,
    options.webhookTransport ?? Webhooks.WebhookTransport.layerFetch,
    options.secretDigest === undefined ? Layer.empty : Layer.succeed(ApiUser.SecretDigest, options.secretDigest)
  )

/** Everything in memory: for tests, demos and trying the library. */
export const layerMemory = (options: RelayOptions = {}): Layer.Layer<RelayServices> =>
  layer(Layer.merge(Storage.layerMemory, RateLimiter.layerMemory), options)
