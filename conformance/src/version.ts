/** Versions the conformance statement names. */
export const kitName = "@custody-relay/conformance"
export const kitVersion = "0.1.0"
export const interfaceVersion = "v1"
