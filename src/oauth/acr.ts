/** The authentication context classes a sign-in may reach, as `acr` values in ID tokens and discovery. */
export const ACR_VALUES = {
  oneFactor: 'urn:service:acr:1fa',
  mfa: 'urn:service:acr:mfa',
  passkey: 'urn:service:acr:passkey',
  passkeyMfa: 'urn:service:acr:passkey_mfa',
} as const;
export const ACR_VALUES_SUPPORTED = Object.values(ACR_VALUES);
