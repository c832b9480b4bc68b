/** The relay's version, reported by the OpenAPI document and the control protocol's profile. */
export const version = "0.1.0"
export const interfaceVersion = "v1"
