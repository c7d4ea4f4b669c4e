<?php
if ($_SERVER['REQUEST_METHOD'] === 'POST') {
    setcookie('wordpress_logged_in', 'user', 0, '/');
    header('Location: /wp-admin/', true, 302);
    exit;
}
echo "login form\n";
