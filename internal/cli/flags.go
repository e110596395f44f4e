package cli

import (
	"errors"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/etcdconn"
	"github.com/etcdlead/etcdlead/internal/runner"
)

// Flag names.
const (
	flagEndpoints    = "endpoints"
	flagDialTimeout  = "dial-timeout"
	flagCACert       = "cacert"
	flagCert         = "cert"
	flagKey          = "key"
	flagInsecureTLS  = "insecure-skip-tls-verify"
	flagUser         = "user"
	flagPasswordFile = "password-file"
	flagLogLevel     = "log-level"
	flagLogFormat    = "log-format"

	flagElection     = "election"
	flagPrefix       = "prefix"
	flagTTL          = "ttl"
	flagID           = "id"
	flagKillSignal   = "kill-signal"
	flagKillTimeout  = "kill-timeout"
	flagFenceMargin  = "fence-margin"
	flagRenew        = "renew-interval"
	flagWait         = "wait"
	flagConflictCode = "conflict-exit-code"
	flagOnce         = "once"
	flagNoWait       = "no-wait"
	flagHolders      = "holders"
	flagHoldAtLeast  = "hold-at-least"
	flagTimeout      = "timeout"
	flagRunID        = "run-id"
	flagRunIDTTL     = "run-id-ttl"
	flagRunIDRetry   = "run-id-retry"

	flagHealthCmd         = "health-cmd"
	flagHealthURL         = "health-url"
	flagHealthInterval    = "health-interval"
	flagHealthTimeout     = "health-timeout"
	flagHealthRetries     = "health-retries"
	flagHealthStartPeriod = "health-start-period"
	flagHealthAction      = "health-action"
	flagEligibleCmd       = "eligible-cmd"
	flagEligibleInterval  = "eligible-interval"
	flagEligibleTimeout   = "eligible-timeout"
	flagRestart           = "restart"
	flagNotify            = "notify"
	flagNotifyTimeout     = "notify-timeout"
	flagStatusAddr        = "status-addr"
	flagContainment       = "containment"
	flagJSON              = "json"
	flagForce             = "force"
)

// Environment variables. Those that a child is also given (README.md) are
// named for what they hold, so a flag variable never clashes with them.
const (
	envEndpoints    = runner.EnvEndpoints // also given to the child
	envDialTimeout  = "ETCDLEAD_DIAL_TIMEOUT"
	envCACert       = "ETCDLEAD_CACERT_FILE"
	envCert         = "ETCDLEAD_CERT_FILE"
	envKey          = "ETCDLEAD_KEY_FILE"
	envInsecureTLS  = "ETCDLEAD_INSECURE_SKIP_TLS_VERIFY"
	envUser         = "ETCDLEAD_USER"
	envPasswordFile = "ETCDLEAD_PASSWORD_FILE"
	envLogLevel     = "ETCDLEAD_LOG_LEVEL"
	envLogFormat    = "ETCDLEAD_LOG_FORMAT"
	envElection     = "ETCDLEAD_ELECTION"
	envPrefix       = "ETCDLEAD_PREFIX"
	envTTL          = "ETCDLEAD_TTL"
	envID           = runner.EnvID // also given to the child
	envKillSignal   = "ETCDLEAD_KILL_SIGNAL"
	envKillTimeout  = "ETCDLEAD_KILL_TIMEOUT"
	envFenceMargin  = "ETCDLEAD_FENCE_MARGIN"
	envRenew        = "ETCDLEAD_RENEW_INTERVAL"
	envWait         = "ETCDLEAD_WAIT"
	envConflictCode = "ETCDLEAD_CONFLICT_EXIT_CODE"
	envOnce         = "ETCDLEAD_ONCE"
	envNoWait       = "ETCDLEAD_NO_WAIT"
	envHolders      = "ETCDLEAD_HOLDERS"
	envHoldAtLeast  = "ETCDLEAD_HOLD_AT_LEAST"
	envTimeout      = "ETCDLEAD_TIMEOUT"
	envRunID        = runner.EnvRunID // also given to the child
	envRunIDTTL     = "ETCDLEAD_RUN_ID_TTL"
	envRunIDRetry   = "ETCDLEAD_RUN_ID_RETRY"

	envHealthCmd         = "ETCDLEAD_HEALTH_CMD"
	envHealthURL         = "ETCDLEAD_HEALTH_URL"
	envHealthInterval    = "ETCDLEAD_HEALTH_INTERVAL"
	envHealthTimeout     = "ETCDLEAD_HEALTH_TIMEOUT"
	envHealthRetries     = "ETCDLEAD_HEALTH_RETRIES"
	envHealthStartPeriod = "ETCDLEAD_HEALTH_START_PERIOD"
	envHealthAction      = "ETCDLEAD_HEALTH_ACTION"
	envEligibleCmd       = "ETCDLEAD_ELIGIBLE_CMD"
	envEligibleInterval  = "ETCDLEAD_ELIGIBLE_INTERVAL"
	envEligibleTimeout   = "ETCDLEAD_ELIGIBLE_TIMEOUT"
	envRestart           = "ETCDLEAD_RESTART"
	envNotify            = "ETCDLEAD_NOTIFY"
	envNotifyTimeout     = "ETCDLEAD_NOTIFY_TIMEOUT"
	envStatusAddr        = "ETCDLEAD_STATUS_ADDR"
	envContainment       = "ETCDLEAD_CONTAINMENT"
	envPassword          = etcdconn.EnvPassword

	envEtcdctlEndpoints   = "ETCDCTL_ENDPOINTS"
	envEtcdctlDialTimeout = "ETCDCTL_DIAL_TIMEOUT"
	envEtcdctlCACert      = "ETCDCTL_CACERT"
	envEtcdctlCert        = "ETCDCTL_CERT"
	envEtcdctlKey         = "ETCDCTL_KEY"
	envEtcdctlUser        = etcdconn.EnvEtcdctlUser
	envEtcdctlPassword    = etcdconn.EnvEtcdctlPassword
)

// fieldFlags name, for each field package campaign checks, the flag that
// sets it.
var fieldFlags = map[any]string{
	campaign.FieldTTL:           "--" + flagTTL,
	campaign.FieldKillTimeout:   "--" + flagKillTimeout,
	campaign.FieldFenceMargin:   "--" + flagFenceMargin,
	campaign.FieldRenewInterval: "--" + flagRenew,
	campaign.FieldPrefix:        "--" + flagPrefix,
	campaign.FieldElection:      "--" + flagElection,
	campaign.FieldID:            "--" + flagID,
	campaign.FieldRunID:         "--" + flagRunID,
}

// inFlags words campaign's refusal of a value in the flag that set it, so
// the user reads what to change on the command line.
func inFlags(err error) error {
	var te *campaign.TimingError
	var ne *campaign.NameError
	switch {
	case errors.As(err, &te):
		return errors.New(te.Format(func(f campaign.TimingField) string { return fieldFlags[f] }))
	case errors.As(err, &ne):
		return errors.New(ne.Format(func(f campaign.NameField) string { return fieldFlags[f] }))
	}
	return err
}
