-- challenge_counts check (queries/registry.ts countChallenges): the 401/403
-- challenges in the range and scope by class and status, counted as the
-- auth_challenges query counts them (fragment auth_challenge_rows), without the
-- verdicts, which need every 2xx around them. The canary report reads its
-- baseline's invalid_token count from it.
-- requires: auth_challenge_rows
SELECT challenge_class, http_status, count() AS challenges
FROM auth_challenge_rows
GROUP BY challenge_class, http_status
ORDER BY challenge_class, http_status
