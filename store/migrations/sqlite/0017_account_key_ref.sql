-- Keys that live outside the keystore: an account whose source is a hardware backend
-- (pkcs11: a PKCS#11 token; awskms: AWS KMS) records where its key is inside that backend
-- (a token object's CKA_ID, a KMS key id). Keystore and dev accounts keep it empty.
ALTER TABLE accounts ADD COLUMN key_ref TEXT NOT NULL DEFAULT '';
