import Engine

extension IdentityProviderSettings {
    /// What a token must say to be accepted for the tenant: its issuer, and one of its clients or audiences.
    public var policy: IdentityTokenPolicy {
        IdentityTokenPolicy(issuer: issuer, audiences: acceptedAudiences)
    }
}
