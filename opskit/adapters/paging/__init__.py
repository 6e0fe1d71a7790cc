"""PagerDuty Events API v2."""
