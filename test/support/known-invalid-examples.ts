// Official HL7 R4 examples that break R4's own rules, so Cinder's validator rightly refuses them.
// Each entry names the file and the rule it breaks; the examples test asserts that exactly these are refused.
export const KNOWN_INVALID_EXAMPLES: Record<string, string> = {};
