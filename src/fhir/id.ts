// What a resource id may be (https://hl7.org/fhir/R4/datatypes.html#id), for the writers (repository/prepare.ts) and
// for references that access decisions resolve (access.ts securityContextTarget).

const ID_RE = /^[A-Za-z0-9\-.]{1,64}$/;

/**
 * A FHIR id, except `.` and `..`: the pattern allows them, but as URL path segments they are dot-segments (RFC 3986
 * §5.2.4) that clients and proxies remove, and as file names they name directories (export files are stored under
 * their job's id).
 */
export function isValidId(id: string): boolean {
  return ID_RE.test(id) && id !== '.' && id !== '..';
}
