/** The JSON reporter: the conformance statement as is. */
import type { Report } from "../Report.js"

export const formatJson = (report: Report): string => JSON.stringify(report, null, 2) + "\n"
